"""The explanation of tape.gradient: J, 1ᵀJ, uᵀJ and gradient * u, against hand-derived numbers."""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pytest
from click.testing import Result
from rich.console import Console

from gradcheck.checks.explain import InputFacts, TargetFacts, explain
from gradcheck.demo import DEMO_CASES, fixtures_dir, matches, upstream_specs
from gradcheck.evidence.explain import Explanation, TensorView
from gradcheck.options import COMMAND_KINDS, CheckOptions
from gradcheck.pipeline import TargetRequest, check_request
from gradcheck.render.explain import render_explanation
from gradcheck.render.explanation_words import (
    FORMULAS,
    coincide_text,
    misconception_text,
    several_text,
)
from gradcheck.render.json_format import explanation_dict

from .conftest import FIXTURES, fixture_module, fixture_target

NATGRAD = fixture_target("natgrad", "expectation_to_meanvarsqrt")
NATGRAD_UPSTREAM = str(FIXTURES / "natgrad_upstream.npz")
# Hand-derived (docs/vjp.md): m = [0.5, -1], L = [[2, 0], [1, 1]], dL/dm = [0.5, 0.25],
# dL/dL = [[1, 0], [2, -1]]. Through L = chol(S), S = eta2 - eta1 eta1ᵀ, with L = [[a, 0], [b, c]]:
# dL/dS11 = g11/(2a) - g21 b/(2a²) + g22 b²/(2a²c) = 1/4 - 1/4 - 1/8 = -1/8,
# dL/dS21 (both mirrored entries together) = g21/a - g22 b/(ac) = 1 + 1/2 = 3/2, dL/dS22 = g22/(2c).
DL_DETA2 = np.array([[-0.125, 0.75], [0.75, -0.5]])
DL_DM = np.array([0.5, 0.25])
M = np.array([0.5, -1.0])
DL_DETA1 = DL_DM - 2.0 * DL_DETA2 @ M  # [2.125, -1.5]


def explained(name: str, function: str, upstream: tuple[str, ...] = ()) -> Explanation:
    request = TargetRequest(fixture_target(name, function), path=str(FIXTURES),
                            upstream_specs=upstream)
    report = check_request(request, CheckOptions(kinds=COMMAND_KINDS["vjp"], explain=True))
    assert report.explain is not None
    return report.explain


def values(view: TensorView | None) -> np.ndarray:
    assert view is not None and view.values is not None
    return np.asarray(view.values)


def test_matvec_gradient_times_u_is_not_u_transpose_j() -> None:
    entry = explained("vjp_examples", "matvec", ("[1.0, -1.0]",)).inputs[0]
    target = entry.targets[0]
    # y = A x with A = [[1, 2], [3, 4]]: J = A, 1ᵀJ = column sums, uᵀJ = [1, -1] A.
    np.testing.assert_array_equal(values(target.jacobian), [[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(values(entry.plain), [4.0, 6.0])
    np.testing.assert_array_equal(values(entry.vjp), [-2.0, -2.0])
    misconception = target.misconception
    assert misconception.compatible
    np.testing.assert_array_equal(values(misconception.values), [4.0, -6.0])
    np.testing.assert_array_equal(values(misconception.difference), [6.0, -4.0])
    assert misconception.max_abs_difference == 6.0
    assert not target.diagonal
    assert "J is not diagonal (e.g. ∂y[1]/∂x[0] = 3)" in coincide_text(entry, target)
    assert "they differ by up to 6" in coincide_text(entry, target)
    assert not entry.several_targets and several_text(entry) is None
    assert entry.max_abs_err < 1e-9


def test_elementwise_function_has_a_diagonal_jacobian_and_they_coincide() -> None:
    entry = explained("vjp_examples", "elementwise", ("[2.0, 3.0]",)).inputs[0]
    target = entry.targets[0]
    cos1 = np.cos(1.0)
    np.testing.assert_allclose(values(target.jacobian), [[1.0, 0.0], [0.0, cos1]])
    np.testing.assert_allclose(values(entry.plain), [1.0, cos1])
    np.testing.assert_allclose(values(entry.vjp), [2.0, 3.0 * cos1])
    assert target.diagonal and target.misconception.max_abs_difference == 0.0
    assert coincide_text(entry, target).startswith("J is diagonal")


def test_two_targets_sum_their_contributions() -> None:
    entry = explained("vjp_examples", "shared", ("2.0", "[1.0, -1.0]")).inputs[0]
    total, scaled = entry.targets
    # x = [1, -2]: total = Σx² (J = 2x = [2, -4]), scaled = 3x (J = 3I).
    np.testing.assert_array_equal(values(total.plain), [2.0, -4.0])
    np.testing.assert_array_equal(values(scaled.plain), [3.0, 3.0])
    np.testing.assert_array_equal(values(entry.plain), [5.0, -1.0])
    np.testing.assert_array_equal(values(total.vjp), [4.0, -8.0])
    np.testing.assert_array_equal(values(scaled.vjp), [3.0, -3.0])
    np.testing.assert_array_equal(values(entry.vjp), [7.0, -11.0])
    np.testing.assert_array_equal(values(entry.sum_of_contributions), [7.0, -11.0])
    assert entry.several_targets and "feeds 2 targets" in str(several_text(entry))
    assert "single element" in coincide_text(entry, total)
    assert coincide_text(entry, scaled).startswith("J is diagonal")


def test_natgrad_deta1_is_dm_minus_twice_deta2_m() -> None:
    explanation = explained("natgrad", "expectation_to_meanvarsqrt", (NATGRAD_UPSTREAM,))
    eta1, eta2 = explanation.inputs
    np.testing.assert_allclose(values(eta2.vjp), DL_DETA2, atol=1e-12)
    np.testing.assert_allclose(DL_DETA1, [2.125, -1.5])
    np.testing.assert_allclose(values(eta1.vjp), DL_DETA1, atol=1e-12)
    np.testing.assert_allclose(values(eta1.finite_difference), DL_DETA1, atol=1e-8)
    assert eta1.max_abs_err < 1e-8
    from_m, from_l = eta1.targets
    # The m target alone gives dL/dm: the answer people expect, which misses the L term.
    np.testing.assert_allclose(values(from_m.vjp), DL_DM)
    np.testing.assert_allclose(values(from_l.vjp), -2.0 * DL_DETA2 @ M, atol=1e-12)
    np.testing.assert_allclose(values(from_m.misconception.values), DL_DM)
    assert not from_l.misconception.compatible
    assert "broadcasts to (2, 2)" in misconception_text(from_l.misconception)
    assert not eta1.misconception.compatible
    # Plain tape.gradient([m, L], eta1): upstream ones for both, 1 + [-0.25, 1].
    np.testing.assert_allclose(values(eta1.plain), [0.75, 2.0], atol=1e-12)
    # eta2 does not reach m: None, not zeros; the FD side is symmetrised (Cholesky convention).
    assert eta2.targets[0].plain is None and eta2.targets[0].jacobian_source == "none"
    assert eta2.finite_difference_symmetrised
    np.testing.assert_allclose(values(eta2.finite_difference), DL_DETA2, atol=1e-8)


def test_upstream_file_is_the_module_constants() -> None:
    module = fixture_module("natgrad")
    with np.load(NATGRAD_UPSTREAM) as archive:
        np.testing.assert_array_equal(archive["m"], module.DL_DM)
        np.testing.assert_array_equal(archive["L"], module.DL_DL)


def hand_built(plain: np.ndarray | None, upstream: np.ndarray, shape: tuple[int, ...],
               out_shape: tuple[int, ...]) -> Explanation:
    jacobian = np.ones(out_shape + shape)
    target = TargetFacts("y", out_shape, upstream, jacobian, "autodiff", plain, None)
    return explain([InputFacts("x", shape, (target,), plain, None)])


def test_not_even_shape_compatible_is_said() -> None:
    data = hand_built(np.ones(3), np.ones(2), (3,), (2,))
    entry = data.inputs[0]
    message = misconception_text(entry.targets[0].misconception)
    assert "is not even shape-compatible" in message
    assert "(3,)" in message and "(2,)" in message
    assert "not even the right shape" in coincide_text(entry, entry.targets[0])


def test_large_tensors_are_summarised() -> None:
    data = hand_built(np.arange(100.0), np.ones(100), (100,), (100,))
    jacobian = data.inputs[0].targets[0].jacobian
    assert jacobian.values is None and jacobian.shape == (100, 100)
    assert jacobian.summary.nonzero == 10000 and jacobian.summary.max == 1.0
    assert data.inputs[0].plain.summary.max == 99.0
    # The JSON report's object: the summary in place of the values.
    published = json.loads(json.dumps(explanation_dict(data)))["inputs"][0]["targets"][0]
    assert published["jacobian"]["values"] is None
    assert published["jacobian"]["summary"]["nonzero"] == 10000


def render(data: Explanation) -> str:
    console = Console(width=200, no_color=True, color_system=None, force_terminal=False)
    with console.capture() as capture:
        console.print(render_explanation(data))
    return capture.get()


def test_renderer_shows_every_column_and_the_formulas() -> None:
    text = render(explained("vjp_examples", "matvec", ("[1.0, -1.0]",)))
    assert "x, shape (2,): what tape.gradient returns" in text
    for header in ("J = tape.jacobian(y, x)", "tape.gradient(y, x)", "output_gradients=u",
                   "(the misconception)"):
        assert header in text
    assert "≠ uᵀJ (off by up to 6)" in text
    assert "uᵀJ from finite differences: -2 -2" in text
    for formula in FORMULAS.values():
        assert formula[:60] in text.replace("\n", " ")


def test_renderer_summarises_large_jacobians() -> None:
    text = render(hand_built(np.arange(100.0), np.ones(100), (100,), (100,)))
    assert "shape (100, 100)" in text and "10000 nonzero" in text


def test_cli_vjp_prints_the_explanation_after_the_table(run_cli: Callable[..., Result]) -> None:
    result = run_cli(["vjp", NATGRAD, "--upstream", NATGRAD_UPSTREAM])
    assert result.exit_code == 0, result.output
    table_end = result.output.index("2 warnings")
    assert result.output.index("eta1, shape (2,): what tape.gradient returns") > table_end
    assert "eta2, shape (2, 2): what tape.gradient returns" in result.output
    assert "2.125  -1.5" in result.output and "1.625 -1.75" in result.output
    assert "uᵀJ from symmetrised finite differences" in result.output
    assert "feeds 2 targets" in result.output


@pytest.mark.parametrize("flags", [["--no-explain"], ["-q"], ["--format", "junit"]])
def test_cli_explanation_off(run_cli: Callable[..., Result], flags: list[str]) -> None:
    result = run_cli(["vjp", fixture_target("vjp_examples", "matvec"), *flags])
    assert result.exit_code == 0, result.output
    assert "what tape.gradient returns" not in result.output


def test_cli_json_carries_the_explanation(run_cli: Callable[..., Result]) -> None:
    result = run_cli(["vjp", fixture_target("vjp_examples", "matvec"), "--upstream",
                      "[1.0, -1.0]", "--format", "json"])
    data = json.loads(result.output)
    assert data["explain"]["inputs"][0]["vjp"]["values"] == [-2.0, -2.0]
    assert data["explain"]["inputs"][0]["plain"]["values"] == [4.0, 6.0]
    assert set(data["explain"]["formulas"]) == set(FORMULAS)
    quiet = run_cli(["vjp", fixture_target("vjp_examples", "matvec"), "--format", "json",
                     "--no-explain"])
    assert "explain" not in json.loads(quiet.output)


def test_demo_includes_the_natgrad_example() -> None:
    case = next(c for c in DEMO_CASES if c.file == "natgrad.py")
    assert case.command == "vjp"
    directory = fixtures_dir()
    specs = upstream_specs(case, directory)
    assert specs == (str(directory / "natgrad_upstream.npz"),)
    request = TargetRequest(f"{directory / case.file}:{case.function}", path=str(directory),
                            upstream_specs=specs)
    report = check_request(request, CheckOptions(kinds=COMMAND_KINDS[case.command], explain=True))
    warned = {r.check for r in report.checks if r.status in ("fail", "error", "warn")}
    assert matches(case, report.ok, warned)
    assert report.explain is not None
    np.testing.assert_allclose(report.explain.inputs[0].vjp.values, DL_DETA1)


def test_cut_path_is_none_not_zeros_while_finite_differences_see_the_dependence() -> None:
    entry = explained("variable_from_input", "f", ("[1.0, -1.0]",)).inputs[0]
    target = entry.targets[0]
    assert entry.plain is None and entry.vjp is None
    assert target.jacobian_source == "none" and "None (not zeros)" in coincide_text(entry, target)
    assert np.any(values(entry.finite_difference))
    assert "the path is cut" in render(explained("variable_from_input", "f", ("[1.0, -1.0]",)))


def test_a_complex_function_is_explained_in_tensorflows_own_terms() -> None:
    """tape.gradient(z * z, z) at z = [0.1j, 1+2j] is conj(2z) = [-0.2j, 2-4j] (TensorFlow's
    implicit upstream is 1 + 0j, as is --upstream ones), and gradient * u is a complex product,
    which equals uᵀJ for every u: z * z is elementwise and holomorphic."""
    request = TargetRequest(fixture_target("complex_gradients", "square"), path=str(FIXTURES),
                            input_specs=("[0.1j, 1+2j]",), upstream_specs=("ones",))
    report = check_request(request, CheckOptions(kinds=COMMAND_KINDS["vjp"], explain=True))
    assert report.explain is not None
    entry = report.explain.inputs[0]
    target = entry.targets[0]
    np.testing.assert_allclose(values(entry.plain), [[0.0, -0.2], [2.0, -4.0]], atol=1e-12)
    np.testing.assert_array_equal(values(target.upstream), [[1.0, 0.0], [1.0, 0.0]])
    np.testing.assert_allclose(values(entry.vjp), values(entry.plain), atol=1e-12)
    assert target.diagonal and target.misconception.max_abs_difference == pytest.approx(0.0)


def test_the_blocks_stack_when_they_do_not_fit_side_by_side() -> None:
    data = hand_built(np.full(3, 3.0), np.array([1.5, -2.25, 0.125]), (3,), (3,))
    row = "1 1 1"  # a row of J (3 x 3, all ones): whole on one line at every width
    for width, side_by_side in ((80, False), (100, False), (200, True)):
        console = Console(width=width, no_color=True, color_system=None, force_terminal=False)
        with console.capture() as capture:
            console.print(render_explanation(data))
        text = capture.get()
        lines = text.splitlines()
        assert max(len(line) for line in lines) <= width and "…" not in text, text
        assert sum(row in line for line in lines) == 3, text
        assert ("target y ─" in text) != side_by_side, text
        assert "J = tape.jacobian(y, x)" in text and "(the misconception)" in text
