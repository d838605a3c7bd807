"""gradcheck's own machinery (promotion, naming, reused tensors, tapes) causes no finding."""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pytest
import tensorflow as tf
from click.testing import Result

import gradcheck

from .conftest import fixture_module, fixture_target, notes

harness = fixture_module("harness_transparency")


def _statuses(report: gradcheck.report.Report) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for c in report.checks:
        found.setdefault(c.check, set()).add(c.status)
    return found


def test_an_argument_called_y_is_not_nondeterminism() -> None:
    report = gradcheck.check(harness.atan2, np.array([1.0, -2.0]), np.array([0.5, 3.0]))
    assert report.ok, report.checks
    assert "nondeterminism" not in _statuses(report)
    assert {c.output for c in report.checks if c.output} == {"out"}
    assert {c.input for c in report.checks if c.check == "jacobian"} == {"y", "x"}


def test_tfp_bijector_cache_does_not_cut_the_gradient() -> None:
    """TFP caches forward results by input tensor: a reused tensor gets a tape-less result."""
    report = gradcheck.check(harness.softplus_bijector, np.array([0.5, -1.0, 2.0]))
    assert report.ok, [c.message for c in report.checks if c.failed]
    assert _statuses(report)["connected"] == {"pass"}
    assert _statuses(report)["jacobian"] == {"pass"}


def test_py_function_gets_a_verdict_through_fresh_tapes() -> None:
    report = gradcheck.check(harness.py_square, np.array([1.0, 2.0, 3.0]))
    assert report.ok, [c.message for c in report.checks if c.failed]
    assert _statuses(report)["jacobian"] == {"pass"}
    assert any("fresh tape" in note for note in notes(report))


def test_py_function_with_a_wrong_gradient_still_fails() -> None:
    @tf.custom_gradient
    def wrong(x: tf.Tensor) -> tuple[tf.Tensor, Callable[[tf.Tensor], tf.Tensor]]:
        return harness.py_square(x), lambda u: u * 3.0 * x

    report = gradcheck.check(wrong, np.array([1.0, 2.0, 3.0]))
    assert "fail" in _statuses(report)["jacobian"]


@pytest.mark.parametrize("function", ["segment_sum"])
def test_indexed_slices_in_forward_mode(function: str) -> None:
    report = gradcheck.check(getattr(harness, function), np.array([1.0, 2.0, 3.0, 4.0]))
    assert report.ok, [c.message for c in report.checks if c.failed]
    assert _statuses(report)["jvp"] == {"pass"}


def test_scatter_nd_in_forward_mode() -> None:
    report = gradcheck.check(lambda x: tf.scatter_nd([[0], [2]], x, [4]), np.array([1.0, 2.0]))
    assert report.ok and _statuses(report)["jvp"] == {"pass"}


def test_float32_literal_in_grad_fn_is_checked_in_float32(run_cli: Callable[..., Result]
                                                           ) -> None:
    result = run_cli(["check", fixture_target("harness_transparency", "scaled"),
                      "-i", "[1.0, 2.0]", "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["inputs"][0]["dtype"] == "float32"
    assert any("cannot be taken in float64" in n and "checked in float32" in n
               for n in report["notes"])


def test_promotion_fallback_still_finds_a_wrong_grad_fn(run_cli: Callable[..., Result]
                                                        ) -> None:
    result = run_cli(["check", fixture_target("harness_transparency", "scaled_wrong"),
                      "-i", "[1.0, 2.0]", "--format", "json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    wrong = [c for c in report["checks"] if c["status"] == "fail"]
    assert wrong and all("double tensor" not in c["message"] for c in wrong)
    assert any(c["check"] == "custom-gradient" and c["location"].endswith(":35")
               for c in wrong)


def test_a_grad_fn_that_fails_in_every_dtype_is_the_users_bug(run_cli: Callable[..., Result]
                                                               ) -> None:
    result = run_cli(["check", fixture_target("harness_transparency", "raises_everywhere"),
                      "-i", "[1.0, 2.0]", "--format", "json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    raised = [c for c in report["checks"] if c["check"] == "custom-gradient"
              and c["status"] == "fail"]
    assert len(raised) == 1 and "raised InvalidArgumentError" in raised[0]["message"]
    assert raised[0]["location"].endswith(":43")


def test_a_float64_npy_input_is_not_demoted(tmp_path: object) -> None:
    """A typed float64 input keeps its dtype: a float32 grad_fn for it is a real finding."""
    report = gradcheck.check(harness.scaled, tf.constant([1.0, 2.0], tf.float64))
    assert not report.ok
    assert report.inputs[0].dtype == "float64"


def test_a_trace_that_raises_inside_tf_scan_leaves_no_state_behind() -> None:
    """TensorFlow leaves a caching device on the global variable scope when a traced tf.scan
    body raises; gradcheck's compiled check traces f, so the next check (here, of a
    tf.recompute_grad, whose eager backward re-enters that scope) must not inherit it."""
    scanned = gradcheck.check(harness.scan_with_python_branch, np.array([1.0, -2.0, 3.0]))
    assert "warn" in _statuses(scanned)["compiled"], scanned.checks
    assert tf.compat.v1.get_variable_scope().caching_device is None
    report = gradcheck.check(harness.recomputed, np.array([0.5, -1.0]))
    assert report.ok, [c.message for c in report.checks if c.failed]


def test_a_raising_trace_inside_one_check_does_not_break_its_eager_gradients() -> None:
    report = gradcheck.check(harness.recomputed_after_scan, np.array([1.0, -2.0, 3.0]), order=2)
    assert [(c.check, c.status) for c in report.checks if c.status not in ("pass", "skip")] == [
        ("compiled", "warn")], report.checks
    assert any(c.check == "second-order" and c.status == "pass" for c in report.checks)


@pytest.mark.parametrize(("function", "other"), [
    ("reversal_slightly_wrong", np.array([-1.0])), ("dead_relu_beside", np.array([-1.0]))])
def test_an_argument_f_does_not_depend_on_here_is_not_float32_rounding(
        function: str, other: np.ndarray) -> None:
    """Unmoved outputs under a 1e-10 move of an argument that f ignores at this point are not
    a float32 cast inside: float64 tolerances stay, and a 3e-5 grad_fn error is caught."""
    report = gradcheck.check(getattr(harness, function), np.array([0.5, -1.0]), other)
    assert not any("to float32 inside" in note for note in notes(report)), report.notes
    assert "fail" in _statuses(report)["custom-gradient"], report.checks


def test_a_float32_cast_inside_a_float64_function_sizes_the_check_for_float32() -> None:
    report = gradcheck.check(harness.casts_to_float32_inside, np.array([0.5, -1.0, 2.0]))
    assert any("rounds its float64 input x to float32 inside" in note for note in notes(report))
    assert report.ok, [c.message for c in report.checks if c.failed]


@pytest.mark.parametrize(("function", "line", "fix"), [
    ("relaxed_bernoulli", 91, "fix: the tf.where is inside tensorflow_probability (called at"),
    ("sharp_sigmoid", 98, "fix: make the branch's input safe with an inner tf.where")])
def test_promotion_does_not_hide_a_nan_gradient_of_the_users_dtype(function: str, line: int,
                                                                     fix: str) -> None:
    """float64 gives a finite gradient where the user's float32 gives NaN: the check runs in
    float32, says so, and finds the NaN at the user's line."""
    report = gradcheck.check(getattr(harness, function), tf.constant(0.99, tf.float32))
    assert not report.ok and report.inputs[0].dtype == "float32"
    assert any("is NaN or infinite in float32, the arguments' own dtype, and finite in float64"
               in note for note in notes(report)), report.notes
    found = [c for c in report.checks if c.check == "non-finite"]
    assert found and found[0].cause is not None and found[0].cause.culprit.startswith("Exp")
    assert str(found[0].location).endswith(f"harness_transparency.py:{line}")
    assert fix in found[0].message, found[0].message


def test_a_gradient_finite_in_the_users_dtype_is_still_checked_in_float64() -> None:
    report = gradcheck.check(harness.sharp_sigmoid, tf.constant(0.6, tf.float32))
    assert report.ok and report.inputs[0].dtype == "float64", report.checks
    assert not any("NaN or infinite" in note for note in notes(report))


@pytest.mark.parametrize(("function", "point"), [
    ("quadratic_slightly_wrong", [[1.0], [1.0]]), ("stationary_offset", [1.0, 1.0]),
    ("stationary_offset", [1.0, 3.0])])
def test_a_symmetric_or_stationary_point_is_not_float32_rounding(function: str,
                                                                 point: list[object]) -> None:
    """f unmoved by a 1e-10 step because the step is orthogonal to its gradient, or because f
    is stationary there (a second-order change below float64's resolution), is float64 code:
    float64 tolerances stay, and a grad_fn 2e-5 off is caught (TF #38428's point)."""
    report = gradcheck.check(getattr(harness, function), np.array(point))
    assert not any("to float32 inside" in note for note in notes(report)), report.notes
    if function == "quadratic_slightly_wrong":
        assert "fail" in _statuses(report)["custom-gradient"], report.checks
    else:
        assert report.ok, report.checks


def test_forward_mode_over_fs_own_accumulator_is_a_warning_not_a_failure() -> None:
    """f's gradient is right (jacobian and vjp pass); gradcheck's ForwardAccumulator around
    f's own is forward over forward, TensorFlow's to get right: a warning that says so."""
    report = gradcheck.check(harness.derivative_by_forward_mode, np.array([0.7]))
    assert report.ok and _statuses(report)["jacobian"] == {"pass"}, report.checks
    jvp = [c for c in report.checks if c.check == "jvp"]
    assert jvp and all(c.status in ("pass", "warn") for c in jvp)
    assert all("runs a ForwardAccumulator of its own" in c.message
               for c in jvp if c.status == "warn")
