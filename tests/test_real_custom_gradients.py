"""Real tf.custom_gradient code (fixtures/real_custom_gradients.py, sources in its comments),
checked through the Python API with function objects and through TARGET strings: the same
findings at the same lines; correct ones pass (float64 and float32), surrogates are located
and accepted with surrogates=, genuine defects are located, and mutants of the correct ones
(negated, bumped by 1e-3, a gradient dropped) are caught at the grad_fn's line."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import gradcheck
from gradcheck.report import Report

from .conftest import FIXTURES, fixture_module

SOURCE = FIXTURES / "real_custom_gradients.py"


@dataclass(frozen=True)
class Case:
    function: str
    kind: str  # "correct", "surrogate" or "defect"
    line: int  # the grad_fn's line every finding about it names
    sites: tuple[str, ...] = ()  # the custom gradients to declare as surrogates
    mistake: str | None = None  # for a defect: the cause gradcheck must name


CASES = [
    Case("f_log1pexp", "correct", 19),
    Case("f_bar", "correct", 29),
    Case("f_log_sinh", "correct", 65),
    Case("f_log_cosh", "correct", 73),
    Case("f_safe_pow", "correct", 113),
    Case("f_grad_reverse", "surrogate", 124, ("grad_reverse",)),
    Case("f_gradient_reverse", "surrogate", 134, ("gradient_reverse",)),
    Case("f_grad_reverse_method", "surrogate", 165, ("grad_reverse",)),
    Case("f_hard_tanh", "surrogate", 173, ("hard_tanh",)),
    Case("f_binarize", "surrogate", 181, ("binarize",)),
    Case("f_sign_clipped_d", "surrogate", 197, ("sign_clipped_d", "sign")),
    Case("f_clip_gradient_by_norm", "surrogate", 206, ("clip_gradient_by_norm",)),
    Case("f_clip_gradients", "surrogate", 214, ("clip_gradients",)),
    Case("f_quantize", "surrogate", 228, ("quantize",)),
    Case("f_gradient_reversal", "surrogate", 239, ("gradient_reversal",)),
    # TensorFlow's own docstring example swaps the two variable gradients (x**1, x**0 for
    # weights[0], weights[1]): tape.gradient(poly, weights) is [6, 3], the truth [3, 6].
    Case("f_linear_poly", "defect", 56, mistake="wrong-values"),
    Case("f_grad_reverse_lambda", "defect", 249, mistake="count"),
    Case("f_clip_grad_layer", "defect", 258, mistake="count"),
    Case("f_norm_kdf", "defect", 276, mistake="wrong-values"),
    Case("f_custom_norm", "correct", 290),
    Case("f_safe_exp", "correct", 302),
    Case("f_safe_acos_squared", "correct", 321),
    Case("f_safe_nan_to_zero", "correct", 333),
    Case("f_safe_log", "correct", 343),
    Case("f_ste_sign", "surrogate", 369, ("_call",)),
    Case("f_approx_sign", "surrogate", 384, ("approx_sign",)),
    Case("f_perturb_and_apply", "surrogate", 420, ("_perturb_and_apply",)),
    Case("f_calcualte_crossings", "surrogate", 441, ("_calcualte_crossings",)),
    Case("f_Quantizer", "surrogate", 457, ("Quantizer",)),
    Case("f_ste_quantize", "surrogate", 469, ("ste_quantize",)),
    Case("f_one_hot_grad", "surrogate", 487, ("one_hot_grad",)),
    # A Gaussian-process safepow: dx = dy * x**(a-1) lacks the factor a.
    Case("f_gamma_exp", "defect", 503, mistake="factor"),
]
CORRECT = [case for case in CASES if case.kind == "correct"]


def located(report: Report) -> list[tuple[str, str, str, str]]:
    return sorted((c.check, c.status, str(c.input), str(c.location)) for c in report.checks
                  if c.failed or c.check == "custom-gradient")


def lines(report: Report) -> set[int]:
    return {c.location.line for c in report.checks
            if c.failed and c.location is not None and c.location.line is not None}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.function)
def test_a_function_object_and_its_target_get_the_same_findings(case: Case) -> None:
    module = fixture_module("real_custom_gradients")
    function = getattr(module, case.function)
    by_object = gradcheck.check(function, *getattr(module, case.function + "_inputs"))
    by_target = gradcheck.check(f"{SOURCE}:{case.function}")
    assert located(by_object) == located(by_target)
    if case.kind == "correct":
        assert by_object.ok, str(by_object)
        return
    assert not by_object.ok
    sites = [c for c in by_object.checks if c.check in ("custom-gradient", "grad-shape")
             and c.failed]
    assert sites and sites[0].location is not None
    assert str(sites[0].location).endswith(f"real_custom_gradients.py:{case.line}")
    if case.mistake is not None:
        assert case.mistake in {c.cause.mistake for c in sites if c.cause}
    if case.kind == "surrogate":
        declared = gradcheck.check(function, *getattr(module, case.function + "_inputs"),
                                   surrogates=case.sites)
        assert declared.ok, str(declared)


@pytest.mark.parametrize("case", CORRECT, ids=lambda case: case.function)
def test_a_correct_one_passes_in_float32(case: Case) -> None:
    report = gradcheck.check(f"{SOURCE}:{case.function}", dtype="float32")
    assert report.ok, str(report)


MUTATION = '''

def _mutant(grads):
    import tensorflow as _tf
    many = isinstance(grads, (list, tuple))
    flat = list(grads) if many else [grads]
    if {kind!r} == "negated":
        flat = [None if g is None else -g for g in flat]
    elif {kind!r} == "bumped":
        flat[0] = flat[0] * _tf.constant(1.001, flat[0].dtype)
    else:
        flat[0] = None
    return type(grads)(flat) if many else flat[0]
'''


def mutant(tmp_path: Path, case: Case, kind: str) -> str:
    """The fixture with the grad_fn's return wrapped in a mutation, on the same line."""
    text = SOURCE.read_text().splitlines()
    line = text[case.line - 1]
    match = re.fullmatch(r"(\s*)return (.+)", line)
    assert match, line
    text[case.line - 1] = f"{match.group(1)}return _mutant(({match.group(2)}))"
    path = tmp_path / f"real_custom_gradients_{kind}.py"
    path.write_text("\n".join(text) + MUTATION.format(kind=kind))
    return f"{path}:{case.function}"


@pytest.mark.parametrize("kind", ["negated", "bumped", "dropped"])
@pytest.mark.parametrize("case", CORRECT, ids=lambda case: case.function)
def test_a_mutant_of_a_correct_one_is_caught_at_its_grad_fn(tmp_path: Path, case: Case,
                                                            kind: str) -> None:
    report = gradcheck.check(mutant(tmp_path, case, kind))
    assert not report.ok, str(report)
    assert lines(report) == {case.line}, str(report)


def test_a_nested_return_is_counted_as_tensorflow_counts_it() -> None:
    """tensorflow/compression's perturb_and_apply returns ([dx] + grad_args, grad_vars) with no
    variables: TensorFlow nest.flattens it to one gradient for one input, and so does gradcheck."""
    report = gradcheck.check(f"{SOURCE}:f_perturb_and_apply")
    counts = [c for c in report.checks if c.failed and c.cause and c.cause.mistake == "count"]
    assert not counts, str(report)
