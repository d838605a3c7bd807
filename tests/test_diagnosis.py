"""Pinpointing: each fixture's finding has the right kind, status and source line."""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pytest
import tensorflow as tf
from click.testing import Result

import gradcheck
from gradcheck.diagnosis.explained import attribute
from gradcheck.evidence import Location
from gradcheck.evidence.causes import Words as Told
from gradcheck.evidence.connected import GradShape
from gradcheck.report import Attribution, Cause, CheckResult, Mistake, Relation, Report

from .conftest import FIXTURES, fixture_module, fixture_target

# (fixture, function, check kind, status, line of the finding, words in its message)
Words = str | tuple[str, ...]
LOCATED = [
    ("composed_custom_gradients", "f", "custom-gradient", "fail", 21,
     "custom_gradient scaled_square (line 17): grad_fn is off by a constant factor of 2"),
    ("variables_missing_keyword", "f", "custom-gradient", "fail", 13,
     "has no `variables=None` keyword"),
    ("too_many_gradients", "weighted", "custom-gradient", "fail", 11,
     ("returned 3 gradient(s) for 2 input(s), so tape.gradient raises ValueError",
      "gradcheck's other checks take its first 2")),
    ("float32_gradient", "cube", "custom-gradient", "fail", 11,
     "returned a float32 gradient for input x of dtype float64"),
    ("custom_gradient_full_jacobian", "f", "grad-shape", "fail", 12,
     ("custom_gradient f (line 7): ", "returned J * upstream")),
    ("custom_gradient_mistakes", "transposed", "custom-gradient", "fail", 13,
     "uses J where Jᵀ is needed"),
    ("custom_gradient_mistakes", "sign_flipped", "custom-gradient", "fail", 23,
     "has the wrong sign"),
    ("custom_gradient_mistakes", "ignores_second_upstream", "custom-gradient", "fail", 33,
     "ignores the upstream of y[1]"),
    ("custom_gradient_mistakes", "summed", "grad-shape", "fail", 43,
     "returned a scalar (a summed result)"),
    ("custom_gradient_mistakes", "drops_weight_gradient", "custom-gradient", "fail", 59,
     "grad_fn returns None for input w, but finite differences show y depends on it"),
    ("stop_gradient_only_path", "f", "graph-break", "fail", 7, "tf.stop_gradient blocks"),
    ("integer_cast_partial", "normalise", "graph-break", "fail", 7, "a cast to int64"),
    ("numpy_round_trip", "f", "graph-break", "fail", 9, ".numpy() copies the value"),
    ("variable_from_input", "f", "graph-break", "fail", 7, "tf.Variable created from x"),
    ("rounding_quantiser", "f", "graph-break", "fail", 7, "Round on the path from x"),
    ("variables_wrong_count", "f", "custom-gradient", "fail", 14,
     "returned 2 variable gradient(s) for 1 variable(s)"),
    ("assign_into_variable", "f", "graph-break", "fail", 9, "assigned into a tf.Variable"),
    ("assign_into_variable", "overwrites_weight", "graph-break", "fail", 22,
     "f assigns into weight before it reads it"),
    ("assign_into_variable", "assigns_a_patch", "graph-break", "fail", 36,
     ("a value computed from patch is assigned into a tf.Variable",
      "tf.tensor_scatter_nd_update")),
    ("assign_into_variable", "assigns_a_patch", "graph-break", "fail", 36,
     "f assigns into canvas before it reads it: the values it assigns over do not matter"),
    ("python_float", "f", "graph-break", "fail", 9, "float()"),
    ("python_float", "polynomial", "graph-break", "fail", 19,
     ("math.pow() turns a tensor computed from x into a Python number",
      "use tf.math.pow")),
    ("numpy_function_path", "f", "graph-break", "fail", 8, "tf.numpy_function"),
    # (several phrases: all must appear)
    ("custom_gradient_jacobian_mistakes", "full_jacobian", "grad-shape", "fail", 19,
     ("custom_gradient full_jacobian (line 15): ", "returned the full Jacobian J",
      "(2, 2) for input x of shape (2,)")),
    ("custom_gradient_jacobian_mistakes", "rows_scaled", "grad-shape", "fail", 29,
     ("custom_gradient rows_scaled (line 25): ",
      "scaled the Jacobian's rows by u but did not sum over the outputs")),
    ("custom_gradient_jacobian_mistakes", "transposed_shape", "grad-shape", "fail", 39,
     ("custom_gradient transposed_shape (line 35): ",
      "returned a transposed-Jacobian-shaped tensor", "(2, 3) for input x of shape (2,)")),
    ("custom_gradient_jacobian_mistakes", "sums_upstream", "custom-gradient", "fail", 49,
     ("custom_gradient sums_upstream (line 45): ",
      "gives every output element the same gradient row: it sums the upstream")),
    ("custom_gradient_wrong_values", "softplus", "custom-gradient", "fail", 11,
     ("custom_gradient softplus (line 7): ", "returns wrong values for input x")),
    ("leaky_wrong_slope", "leaky", "custom-gradient", "fail", 11,
     ("custom_gradient leaky (line 7): ", "returns wrong values for input x")),
]
CLEAN = [
    ("custom_gradient_correct", "f"),
    ("variables_correct", "f"),
    ("no_false_alarms", "f"),
    ("no_false_alarms", "constant_function"),
    ("two_in_two_out", "f"),
]


def findings(report: Report, check: str) -> list[CheckResult]:
    return [c for c in report.checks if c.check == check]


def says(message: str, words: Words) -> bool:
    return all(w in message for w in ((words,) if isinstance(words, str) else words))


@pytest.mark.parametrize(("name", "function", "check", "status", "line", "words"), LOCATED)
def test_api_locates_the_bug(name: str, function: str, check: str, status: str, line: int,
                             words: Words) -> None:
    report = gradcheck.check(str(FIXTURES / f"{name}.py") + f":{function}")
    assert not report.ok
    matching = [c for c in findings(report, check)
                if c.status == status and says(c.message, words)]
    assert matching, [(c.check, c.status, c.message) for c in report.checks]
    location = matching[0].location
    assert str(location).endswith(f"{name}.py:{line}")
    # Findings that say where come before the core checks.
    assert report.checks.index(matching[0]) < len(report.checks) - 1


@pytest.mark.parametrize(("name", "function", "check", "status", "line", "words"), LOCATED[::3])
def test_cli_locates_the_bug(run_cli: Callable[..., Result], name: str, function: str,
                             check: str, status: str, line: int, words: Words) -> None:
    result = run_cli(["check", fixture_target(name, function), "--format", "json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    matching = [c for c in data["checks"] if c["check"] == check and c["status"] == status
                and says(c["message"], words)]
    assert matching and matching[0]["location"].endswith(f"{name}.py:{line}")


@pytest.mark.parametrize(("name", "function"), CLEAN)
def test_no_false_alarm(name: str, function: str) -> None:
    report = gradcheck.check(str(FIXTURES / f"{name}.py") + f":{function}")
    assert report.ok, [(c.check, c.status, c.message) for c in report.checks if c.failed]
    assert not findings(report, "graph-break")


def test_a_grad_fn_mistake_is_named_on_a_block_over_the_display_limit() -> None:
    report = gradcheck.check(str(FIXTURES / "custom_gradient_mistakes.py") + ":sign_flipped",
                             np.linspace(-1.0, 1.0, 10))
    site = [c for c in findings(report, "custom-gradient") if c.failed][0]
    assert str(site.location).endswith("custom_gradient_mistakes.py:23")
    assert "grad_fn has the wrong sign: it returns -uᵀJ" in site.message


def test_composition_names_only_the_wrong_custom_gradient() -> None:
    report = gradcheck.check(str(FIXTURES / "composed_custom_gradients.py") + ":f")
    verdicts = {c.message.split(" (")[0]: c.status for c in findings(report, "custom-gradient")}
    assert verdicts == {"custom_gradient scaled_square": "fail",
                        "custom_gradient stable_softplus": "pass"}
    jacobian = [c for c in findings(report, "jacobian") if c.failed][0]
    assert "likely cause: custom_gradient scaled_square" in jacobian.message
    assert str(jacobian.location).endswith(":21")


def test_partial_cut_points_the_jacobian_failure_at_the_cast() -> None:
    report = gradcheck.check(str(FIXTURES / "integer_cast_partial.py") + ":normalise")
    connected = findings(report, "connected")[0]
    assert connected.status == "pass"  # not None: the cut is partial
    jacobian = findings(report, "jacobian")[0]
    assert jacobian.status == "fail" and jacobian.location is not None
    assert str(jacobian.location).endswith("integer_cast_partial.py:7")
    assert "likely cause: a cast to int64" in jacobian.message


def test_several_cuts_are_all_listed() -> None:
    report = gradcheck.check(str(FIXTURES / "two_cuts.py") + ":f")
    cuts = {c.location.line if c.location else None: c.message
            for c in findings(report, "graph-break")}
    assert set(cuts) == {7, 8}
    assert "tf.stop_gradient" in cuts[7] and "int64" in cuts[8]


def test_a_cut_that_cannot_be_located_is_said_honestly() -> None:
    """tf.stop_gradient inside a tf.while_loop body: the walk does not enter loop bodies."""
    report = gradcheck.check(
        lambda v: tf.while_loop(lambda i, a: i < 2,
                                lambda i, a: (i + 1, tf.stop_gradient(a) * 2.0), [0, v])[1],
        np.array([0.5, 1.5]))
    unlocated = findings(report, "graph-break")
    assert [c.status for c in unlocated] == ["warn"]
    assert unlocated[0].location is None
    assert "could not locate where the gradient path from v is lost" in unlocated[0].message
    assert "usual causes:" in unlocated[0].message


def test_a_cut_on_a_variable_argument_is_located() -> None:
    """The graph walk starts from the variable's reads, as it does for weights f reads."""
    variable = tf.Variable([0.5, 1.5], dtype=tf.float64)
    def stopped(v: tf.Variable) -> tf.Tensor:
        return tf.exp(tf.stop_gradient(v * 2.0))

    report = gradcheck.check(stopped, variable)
    cut = findings(report, "graph-break")
    assert [c.status for c in cut] == ["fail"]
    assert "tf.stop_gradient blocks the gradient from v" in cut[0].message
    assert str(cut[0].location).endswith(
        f"test_diagnosis.py:{stopped.__code__.co_firstlineno + 1}")


def test_callable_api_still_finds_graph_breaks() -> None:
    module = fixture_module("numpy_round_trip")
    report = gradcheck.check(module.f, *module.f_inputs)
    cut = findings(report, "graph-break")[0]
    assert cut.status == "fail" and cut.location is not None
    assert str(cut.location).endswith("numpy_round_trip.py:9")


def test_no_instrument_turns_observation_off(run_cli: Callable[..., Result]) -> None:
    result = run_cli(["check", fixture_target("composed_custom_gradients"), "--format", "json",
                      "--no-instrument"])
    checks = json.loads(result.stdout)["checks"]
    assert not [c for c in checks if c["check"] == "custom-gradient"]
    assert any(c["check"] == "jacobian" and c["status"] == "fail" for c in checks)


def test_github_annotations(run_cli: Callable[..., Result]) -> None:
    result = run_cli(["check", fixture_target("stop_gradient_only_path"), "-q"],
                     env={"GITHUB_ACTIONS": "true"})
    annotations = [line for line in result.stdout.splitlines() if line.startswith("::error")]
    assert len(annotations) == 1
    assert annotations[0].startswith("::error file=")
    assert "stop_gradient_only_path.py,line=7,title=gradcheck graph-break::" in annotations[0]


def test_declared_surrogate_gradients_are_warnings(run_cli: Callable[..., Result]) -> None:
    target = fixture_target("straight_through", "quantised_layer")
    plain = json.loads(run_cli(["check", target, "--format", "json"]).stdout)
    site = [c for c in plain["checks"] if c["check"] == "custom-gradient"][0]
    assert site["status"] == "fail" and "straight-through estimator?" in site["message"]
    assert site["location"].endswith("straight_through.py:10")
    declared = run_cli(["check", target, "--format", "json", "--surrogate", "ste_round"])
    assert declared.exit_code == 0
    data = json.loads(declared.stdout)
    assert {c["check"]: c["status"] for c in data["checks"] if c["status"] != "pass"} == {
        "custom-gradient": "warn", "jacobian": "warn", "vjp": "warn"}


def test_a_finding_explained_twice_says_both_in_the_order_found() -> None:
    shape = CheckResult("grad-shape", "fail", input="x", output="y",
                        evidence=GradShape((2, 2), (2,), "y", "x"))
    site = Cause(Mistake.FULL_JACOBIAN, "custom_gradient f (line 4)", Location("m.py", 9),
                 Told("returns J"))
    once = attribute(shape, Attribution(Relation.LIKELY_CAUSE, site))
    twice = attribute(once, Attribution(Relation.NON_FINITE, Cause(
        Mistake.NON_FINITE_VALUE, "Sqrt", Location("m.py", 3), Told(""))))
    assert once.message.endswith("; likely cause: custom_gradient f (line 4) (grad_fn at m.py:9)")
    assert twice.message == once.message + (
        "; likely cause: non-finite values from Sqrt at m.py:3 (see the non-finite check)")
    assert twice.headline == shape.headline == shape.message


def test_a_refused_variables_keyword_is_told_first_not_as_a_none_gradient() -> None:
    """TensorFlow refuses a grad_fn without `variables=` for a custom gradient that reads a
    variable (TF #31945): that is the finding, not 'grad_fn returns None for input outside'."""
    report = gradcheck.check(fixture_target("variables_missing_keyword", "calls_it"))
    failed = [c for c in report.checks if c.failed]
    assert failed and "has no `variables=None` keyword" in failed[0].message, failed[0].message
    assert str(failed[0].location).endswith("variables_missing_keyword.py:28")
    assert not any("grad_fn returns None for input outside" in c.message for c in failed)
