"""Gradients no op can give, TensorFlow's own gaps and the user's explicit dtype: each
finding's kind, status and line, on our fixtures and on real code reproduced from TensorFlow
and Keras questions; and correct functions of each kind pass."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from click.testing import Result

import gradcheck
from gradcheck.report import CheckResult, Report

from .conftest import FIXTURES, fixture_module, notes


def _check(fixture: str, function: str, **options: Any) -> Report:
    options.setdefault("compiled", False)
    return gradcheck.check(f"{FIXTURES / fixture}.py:{function}", **options)


def _found(report: Report, kind: str) -> list[CheckResult]:
    return [c for c in report.checks if c.check == kind]


def _line(result: CheckResult) -> int:
    assert result.location is not None and result.location.line is not None, result.message
    return result.location.line


# (fixture, function, status of its graph-breaks, {input: (line, words)}, exit code)
NO_GRADIENT = [
    ("no_gradient_ops", "accuracy", "fail",
     {"pred": (10, "Round on the path"), "label": (10, "compares values (tf.equal")}, 1),
    ("no_gradient_ops", "argmax_pick", "warn", {"logits": (27, "constant (tf.argmax)")}, 0),
    ("no_gradient_ops", "sort_rank", "fail",
     {"x": (35, "(tf.math.top_k / tf.argsort indices) returns int32")}, 1),
    ("no_gradient_ops", "topk_indices", "fail", {"x": (43, "returns int32 values")}, 1),
    ("no_gradient_ops", "int_cast", "fail", {"x": (51, "a cast to int32")}, 1),
    ("no_gradient_ops", "one_of_two", "warn", {"x": (84, "Round on the path")}, 0),
    ("no_gradient_ops", "integer_weight_model", "fail", {"scale/w": (97, "a cast to int32")}, 1),
    # Real code (sources in the fixture's comments).
    ("real_no_gradients", "count_loss", "fail",
     {"prediction": (20, "Round on the path"), "output": (20, "compares values (tf.equal")}, 1),
    ("real_no_gradients", "floor_loss", "fail",
     {"classifier/logits/kernel": (31, "constant (tf.floor)"),
      "classifier/logits/bias": (31, "constant (tf.floor)")}, 1),
    ("real_no_gradients", "mda", "fail",
     {"y_true": (40, "constant (tf.sign)"), "y_pred": (40, "constant (tf.sign)")}, 1),
    ("real_no_gradients", "custom_rhos", "fail",
     {"y_true": (50, "tf.numpy_function"), "y_pred": (51, "tf.numpy_function")}, 1),
    ("real_no_gradients", "argmax_loss", "fail",
     {"classifier/logits/kernel": (63, "constant (tf.argmax)")}, 1),
    ("real_no_gradients", "problematic_loss", "warn", {"y_pred": (72, "compares values (>)")}, 0),
]


@pytest.mark.parametrize(("fixture", "function", "status", "expected", "exit_code"),
                         NO_GRADIENT, ids=[f"{c[0]}:{c[1]}" for c in NO_GRADIENT])
def test_a_source_no_op_gives_a_gradient_is_located_at_the_op(
        fixture: str, function: str, status: str, expected: dict[str, tuple[int, str]],
        exit_code: int) -> None:
    report = _check(fixture, function)
    breaks = {c.input: c for c in _found(report, "graph-break")}
    for name, (line, words) in expected.items():
        assert name in breaks, [c.message for c in report.checks if c.status != "pass"]
        found = breaks[name]
        assert (found.status, _line(found)) == (status, line), found.message
        assert words in found.message
        assert found.cause is not None and found.cause.fix
    assert report.exit_code == exit_code


def test_the_fix_names_relaxations_and_straight_through() -> None:
    found = _found(_check("no_gradient_ops", "accuracy"), "graph-break")[0]
    assert "smooth relaxation" in found.message and "--surrogate" in found.message


def test_an_unused_input_stays_a_pass() -> None:
    report = _check("unused_input", "f")
    assert report.ok and not _found(report, "graph-break")


@pytest.mark.parametrize(("fixture", "function"), [
    ("no_gradient_ops", "soft_accuracy"), ("no_gradient_ops", "py_function_tf"),
    ("real_no_gradients", "soft_argmax")])
def test_smooth_relaxations_pass(fixture: str, function: str) -> None:
    report = _check(fixture, function)
    assert report.ok and not _found(report, "graph-break"), report


def test_a_straight_through_estimator_passes_as_a_declared_surrogate() -> None:
    assert not _check("real_no_gradients", "ste_count").ok
    report = _check("real_no_gradients", "ste_count", surrogates=("ste_round",))
    assert report.ok and not _found(report, "graph-break")


def test_a_function_object_gets_the_same_lines_in_float32_and_float64() -> None:
    module = fixture_module("no_gradient_ops")
    for dtype in (tf.float32, tf.float64):
        pred = tf.constant([0.2, 0.7, 0.4, 0.9, 0.1, 0.6], dtype)
        label = tf.constant([0.0, 1.0, 1.0, 1.0, 0.0, 0.0], dtype)
        report = gradcheck.check(module.accuracy, pred, label, compiled=False)
        lines = {c.input: _line(c) for c in _found(report, "graph-break")}
        assert lines == {"pred": 10, "label": 10} and report.exit_code == 1


def test_the_command_line_fails_with_the_line(run_cli: Callable[..., Result]) -> None:
    result = run_cli(["check", f"{FIXTURES / 'no_gradient_ops.py'}:sort_rank", "--format",
                      "json", "--no-compiled"])
    assert result.exit_code == 1
    assert '"check": "graph-break"' in result.output and "no_gradient_ops.py:35" in result.output


# Family 3: TensorFlow's gaps.
def test_an_op_without_a_forward_mode_rule_is_a_jvp_skip_at_its_line() -> None:
    report = _check("tf_gaps", "resize_v1")
    [jvp] = _found(report, "jvp")
    assert (jvp.status, _line(jvp)) == ("skip", 12)
    assert "no forward-mode rule for ResizeBilinear" in jvp.message and report.ok


@pytest.mark.parametrize(("function", "line", "op"), [
    ("progan_discriminator", 16, "ResizeBilinear"),
    ("wgan_critic", 23, "ResizeNearestNeighbor"),
    ("lrn_features", 30, "LRN"),
    ("roi_align", 37, "CropAndResize")])
def test_tensorflows_missing_second_derivatives_are_located(function: str, line: int,
                                                            op: str) -> None:
    report = _check("real_tf_gaps", function, order=2)
    [second] = [c for c in _found(report, "second-order") if c.failed]
    assert _line(second) == line and second.cause is not None
    assert second.cause.mistake == "no-second-order-gradient" and second.cause.culprit == op
    assert "TensorFlow's missing gradient" in second.message
    [jvp] = _found(report, "jvp")
    assert (jvp.status, _line(jvp)) == ("skip", line)


def test_a_missing_second_derivative_of_our_fixture_is_at_the_resize() -> None:
    [second] = [c for c in _found(_check("tf_gaps", "resize_squared", order=2),
                                  "second-order") if c.failed]
    assert _line(second) == 17 and "ResizeBilinearGrad" in second.message


@pytest.mark.parametrize(("fixture", "function", "order"), [
    ("real_tf_gaps", "pooled", 2), ("real_tf_gaps", "sign", 2),
    ("tf_gaps", "uses_nested", 2), ("tf_gaps", "nested_square", 2),
    ("tf_gaps", "mixed_bce", 1), ("tf_gaps", "half_loss", 1),
    ("real_tf_gaps", "mixed_guide", 1)])
def test_what_tensorflow_can_do_passes(fixture: str, function: str, order: int) -> None:
    report = _check(fixture, function, order=order, compiled=True)
    assert report.ok, str(report)


def test_float16_inside_is_judged_with_float16_tolerances() -> None:
    report = _check("tf_gaps", "mixed_bce")
    assert any("computes in float16 inside" in note for note in notes(report))


# Family 4: the user's explicit dtype.
def test_an_explicit_float64_reports_a_float32_gradient() -> None:
    assert _check("tf_gaps", "uses_cube").ok  # auto: gradcheck's promotion, a note only
    report = _check("tf_gaps", "uses_cube", dtype="float64")
    [wrong] = [c for c in report.checks if c.check == "custom-gradient" and c.failed]
    assert _line(wrong) == 68 and "returned a float32 gradient" in wrong.message


def test_float64_arrays_given_by_the_user_are_checked_in_float64() -> None:
    module = fixture_module("tf_gaps")
    report = gradcheck.check(module.uses_cube, np.array([0.5, -1.0, 2.0]), compiled=False)
    assert not report.ok and report.inputs[0].dtype == "float64"


def test_a_py_function_through_numpy_is_named_at_its_line() -> None:
    report = _check("no_gradient_ops", "py_function")
    [cut] = _found(report, "graph-break")
    assert (cut.status, _line(cut)) == ("fail", 66) and "tf.py_function" in cut.message
    [shape] = _found(report, "grad-shape")
    assert _line(shape) == 66 and "likely cause: tf.py_function" in shape.message


def test_a_real_float64_gradient_passes_in_an_explicit_float64() -> None:
    report = _check("real_dtypes", "hsv", dtype="float64")
    assert report.ok and report.inputs[0].dtype == "float64", str(report)


@pytest.mark.parametrize(("name", "line"), [("ranks", 7), ("rank_loss", 11)])
def test_an_integer_result_of_argsort_names_the_op_without_a_gradient(name: str,
                                                                      line: int) -> None:
    module = fixture_module("integer_rank_loss")
    report = gradcheck.check(getattr(module, name), *module.ranks_inputs)
    [cut] = report.checks
    assert (cut.check, cut.status, cut.input) == ("graph-break", "fail", "x")
    assert str(cut.location).endswith(f"integer_rank_loss.py:{line}")
    assert "tf.argsort" in cut.message and "soft rank" in cut.message
    assert report.exit_code == 1 and report.outputs[0].dtype == "int32"


# Users' reports (fixtures/real_integer_results.py): (function, {input: (line, op words)},
# status, exit code); an integer result or an integer path inside f, never an input error.
REAL_INTEGER = [
    ("not_use_cast", {"a": (12, "tf.argmax")}, "fail", 1),
    ("use_cast", {"a": (17, "tf.argmax")}, "fail", 1),
    ("argmax_int64", {"x": (25, "tf.argmax")}, "fail", 1),
    ("histogram_loss", {"input1": (33, "HistogramFixedWidth"),
                        "input2": (34, "HistogramFixedWidth")}, "fail", 1),
    ("argmax_crossentropy", {"logits": (45, "tf.argmax")}, "fail", 1),
    # keras.ops.argmax in a Lambda: its own Equal and Bitcast are not named beside ArgMax.
    ("lambda_argmax", {"x": (62, "tf.argmax"), "probabilities/kernel": (62, "tf.argmax"),
                       "probabilities/bias": (62, "tf.argmax")}, "warn", 0),
]


@pytest.mark.parametrize(("name", "expected", "status", "code"), REAL_INTEGER)
def test_users_integer_results_name_the_op_its_line_and_a_relaxation(
        name: str, expected: dict[str, tuple[int, str]], status: str, code: int) -> None:
    report = _check("real_integer_results", name)
    cuts = _found(report, "graph-break")
    assert {c.input: _line(c) for c in cuts} == {k: v[0] for k, v in expected.items()}, \
        str(report)
    assert len(cuts) == len(expected), str(report)
    for cut in cuts:
        assert cut.status == status and expected[cut.input or ""][1] in cut.message
        assert "smooth relaxation" in cut.message
    assert report.exit_code == code


def test_tensorflows_own_gradient_raising_names_the_op_and_its_line() -> None:
    module = fixture_module("tensorflow_gradient_raises")
    report = gradcheck.check(module.gather_scalar, *module.gather_scalar_inputs)
    [raised] = [c for c in report.checks if c.failed]
    assert str(raised.location).endswith("tensorflow_gradient_raises.py:8")
    assert raised.message.startswith("TensorFlow's own gradient of GatherNd at")
    assert "registered gradient for GatherNd is at fault" in raised.message
    assert "tf.gather_nd(x, [[i]])[0]" in raised.message


def test_tensorflow_gradient_raising_in_eager_only_f_is_located() -> None:
    """The op's line comes from the ops f ran eagerly when tf.function cannot trace f."""
    module = fixture_module("tensorflow_gradient_raises")
    report = gradcheck.check(module.gather_scalar_logged, *module.gather_scalar_inputs)
    [raised] = [c for c in report.checks if c.failed]
    assert str(raised.location).endswith("tensorflow_gradient_raises.py:16")
    assert "registered gradient for GatherNd is at fault" in raised.message
