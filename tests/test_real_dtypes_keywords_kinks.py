"""Real code (fixtures/real_dtypes_keywords_kinks.py, sources in its comments): the user's dtype is
kept and gradcheck's own promotion never produces a finding, a custom gradient called with
keyword tensors is found at the call, and nondeterminism, an op XLA cannot compile and a kink
are each shown at the user's line. Correct code passes."""

from __future__ import annotations

from typing import Any

import pytest

import gradcheck
from gradcheck.report import CheckResult, Report

from .conftest import FIXTURES, fixture_module, notes

MODULE = "real_dtypes_keywords_kinks"
SOURCE = (FIXTURES / f"{MODULE}.py").read_text().splitlines()
CASES = fixture_module(MODULE)


def _run(function: str, **options: Any) -> Report:
    """One check per case; the compiled check only where the family is about it."""
    options.setdefault("compiled", False)
    return gradcheck.check(getattr(CASES, function), *getattr(CASES, f"{function}_inputs"),
                           **options)


def _line_of(snippet: str) -> int:
    """The line of the fixture holding snippet (which must be on exactly one line)."""
    lines = [number for number, text in enumerate(SOURCE, start=1) if snippet in text]
    assert len(lines) == 1, (snippet, lines)
    return lines[0]


def _line(result: CheckResult) -> int:
    assert result.location is not None, result.message
    assert result.location.path.endswith(f"{MODULE}.py"), result.location
    assert result.location.line is not None, result.location
    return result.location.line


def _kind(report: Report, kind: str) -> list[CheckResult]:
    return [c for c in report.checks if c.check == kind]


def _not_passed(report: Report) -> list[str]:
    return [f"{c.check} {c.status}: {c.message}" for c in report.checks
            if c.status not in ("pass", "skip")]


# --- Family 4: correct float32 code with Python float literals, and the user's own float64 ---

@pytest.mark.parametrize(("function", "compiled", "note"), [
    # tfp Normal(loc=0.0, scale=1.0).log_cdf: float32 parameters meet gradcheck's float64
    ("normal_log_cdf", True, "checked in float32, the arguments' own dtype"),
    # grad_fn with tf.where(x >= 0, 1.0, -1.0)
    ("abs_loss", False, "checked in float32, the arguments' own dtype"),
    # tf.pow(10.0, y): eager and XLA parity, the compiled check in the user's dtype
    ("std_error", True, "the compiled check ran in float32, the arguments' own dtype"),
    # the user's float64 model with a float64 constant in tf.where: kept in float64
    ("where_constant", False, None),
])
def test_correct_code_with_float_literals_passes_in_the_users_dtype(
        function: str, compiled: bool, note: str | None) -> None:
    report = _run(function, compiled=compiled)
    assert report.ok and not _not_passed(report), _not_passed(report)
    if note is not None:
        assert any(note in n for n in notes(report)), notes(report)
    else:
        assert {i.dtype for i in report.inputs} == {"float64"}
    if compiled:
        assert {c.status for c in _kind(report, "compiled")} == {"pass"}


def test_an_explicit_float64_is_kept_and_the_grad_fns_float32_is_reported() -> None:
    report = _run("abs_loss", dtype="float64")
    assert not report.ok and {i.dtype for i in report.inputs} == {"float64"}
    assert not any("checked in float32" in n for n in notes(report)), notes(report)
    found = [c for c in _kind(report, "custom-gradient") if c.status == "fail"]
    assert found and all(c.cause is not None and c.cause.mistake == "dtype-mix" for c in found)
    assert {_line(c) for c in found} == {_line_of("return dy * g")}
    assert "mixes float32 and float64" in found[0].message


# --- Family 5: custom gradients called with keywords -----------------------------------------

@pytest.mark.parametrize(("function", "call", "words"), [
    ("bar_keywords", "return bar(x=x, y=y)", "its grad_fn is never called"),
    ("bar_mixed", "return bar(x, y=y)", "bar gets y by keyword"),
    ("func_keyword", "return func(x, y=y)", "func gets y by keyword"),
    ("clip_tensor_keywords", "return gradient_clip_layer(a, clip_value_min=lo",
     "gets clip_value_min, clip_value_max by keyword"),
])
def test_keyword_tensors_are_found_at_the_call(function: str, call: str, words: str) -> None:
    report = _run(function)
    assert not report.ok
    keywords = [c for c in _kind(report, "custom-gradient")
                if c.cause is not None and c.cause.mistake == "keywords"]
    assert len(keywords) == 1, [c.message for c in _kind(report, "custom-gradient")]
    assert keywords[0].status == "fail" and words in keywords[0].message
    assert "only positional arguments" in keywords[0].message
    assert _line(keywords[0]) == _line_of(call)


def test_python_floats_by_keyword_explain_the_gradient_count_at_the_call() -> None:
    # clip_grad_layer(a, clip_min=-0.1, clip_max=0.1): the bounds are Python floats, not
    # tensors, so no input is lost; the three gradients for one input are, at the call
    report = _run("clip_keywords")
    count = [c for c in _kind(report, "custom-gradient")
             if c.cause is not None and c.cause.mistake == "count"]
    assert len(count) == 1 and count[0].status == "fail"
    assert "returned 3 gradient(s) for 1 input(s)" in count[0].message
    assert "clip_min, clip_max passed by keyword" in count[0].message
    assert _line(count[0]) == _line_of("b = clip_grad_layer(a, clip_min=-0.1")


# --- Family 6: every finding that has a user line shows it -----------------------------------

@pytest.mark.parametrize(("function", "op", "culprit"), [
    ("assign_then_square", "v.assign_add(x)", "AssignAddVariableOp"),
    ("stateful_guide", "x1.assign_add(x0)", "AssignAddVariableOp"),
    ("trick", "eps = tf.random.normal(shape=mean.shape)", "RandomStandardNormal"),
    ("awgn_channel", "noisy = x + tf.random.normal", "RandomStandardNormal"),
    ("semantic_channel", "n = tf.random.normal(", "RandomStandardNormal"),
])
def test_nondeterminism_is_located_at_the_stateful_op(function: str, op: str,
                                                      culprit: str) -> None:
    report = _run(function)
    found = _kind(report, "nondeterminism")
    assert len(found) == 1 and found[0].status == "fail"
    assert found[0].cause is not None and culprit in str(found[0].cause.culprit)
    assert _line(found[0]) == _line_of(op)


@pytest.mark.parametrize(("function", "op", "culprit"), [
    ("expm", "B = tf.linalg.expm(A)", "matrix_exponential"),
    ("printed", 'tf.print("x:", x)', "StringFormat"),
])
def test_an_op_xla_cannot_compile_is_a_skip_at_its_line(function: str, op: str,
                                                         culprit: str) -> None:
    report = _run(function, compiled=True)
    assert report.ok, _not_passed(report)
    skips = [c for c in _kind(report, "compiled") if c.status == "skip" and c.location]
    assert skips and skips[0].cause is not None
    assert skips[0].cause.mistake == "xla-unsupported" and culprit in str(skips[0].cause.culprit)
    assert _line(skips[0]) == _line_of(op)


def test_a_hinge_at_its_margin_is_a_kink_at_the_maximum() -> None:
    report = _run("hinge")
    kinks = _kind(report, "kink")
    assert report.ok and kinks and {c.status for c in kinks} == {"warn"}
    assert all(c.cause is not None and c.cause.culprit == "Maximum" for c in kinks)
    assert {_line(c) for c in kinks} == {_line_of("tf.maximum(1.0 - y_true * y_pred, 0.0)")}


@pytest.mark.parametrize(("function", "compiled"), [
    ("modified_tanh", False),   # relu(x) + relu(-x) times tanh(x): differentiable at 0
    ("repeat_values", True),    # TF 2.21's XLA compiles tf.repeat with captured repeats
])
def test_correct_family_6_code_passes(function: str, compiled: bool) -> None:
    report = _run(function, compiled=compiled)
    assert report.ok and not _not_passed(report), _not_passed(report)
    assert not _kind(report, "kink") and not _kind(report, "nondeterminism")


@pytest.mark.xfail(strict=True, reason=(
    "tf.abs at a tie (y_pred == y_true, ai.stackexchange 26426): Abs's gradient there, 0, equals "
    "the central difference, so no kink finding is given and the check passes silently"))
def test_abs_at_a_tie_is_a_kink_at_the_abs() -> None:
    report = _run("abs_error_loss")
    kinks = _kind(report, "kink")
    assert kinks and kinks[0].cause is not None and kinks[0].cause.culprit == "Abs"
    assert _line(kinks[0]) == _line_of("return tf.reduce_mean(tf.abs(y_true - y_pred))")


def test_ties_that_make_autodiff_wrong_are_located_at_the_tied_op() -> None:
    """TensorFlow's sigmoid cross entropy formula at logits 0 (swift-apis PR 480): Maximum's
    and Abs's tie gradients give autodiff 0 where the slope is -0.5; autodiff followed across
    the step changes there, so the tie is found and named at the user's line."""
    report = _run("sigmoid_cross_entropy")
    located = [c for c in report.checks if c.status in ("fail", "warn")
               and c.location is not None
               and _line(c) == _line_of("return tf.maximum(logits, 0.0) - logits * labels")]
    assert located and located[0].cause is not None
    assert located[0].cause.culprit in ("Maximum", "Abs")
