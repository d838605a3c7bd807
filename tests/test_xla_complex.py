"""Complex Sqrt, Rsqrt and Reciprocal, whose gradient XLA leaves unconjugated (eager TensorFlow
and finite differences agree): the XLA compiled finding is at the op's line, says TensorFlow's
gradient under XLA is at fault, and gives the spelling XLA gets right; those spellings pass."""

from __future__ import annotations

import pytest

import gradcheck
from gradcheck.report import CheckResult, Report

from .conftest import fixture_target

XLA = "tf.function(jit_compile=True)"


def _compiled(report: Report) -> list[CheckResult]:
    return [c for c in report.checks if c.check == "compiled"]


@pytest.mark.parametrize(("function", "line", "called", "exact"), [
    ("root", 12, "tf.sqrt(z)", "tf.pow(z, 0.5)"),
    ("inverse_root", 19, "tf.math.rsqrt(z)", "tf.pow(z, -0.5)"),
    ("admittance", 26, "tf.math.reciprocal(z)", "1 / z")])
@pytest.mark.parametrize("dtype", ["float32", "float64"])  # complex64, complex128
def test_xla_unconjugated_complex_gradient_is_tensorflows_at_the_op(
        function: str, line: int, called: str, exact: str, dtype: str) -> None:
    report = gradcheck.check(fixture_target("xla_complex", function), dtype=dtype)
    failed = [c for c in report.checks if c.failed]
    assert len(failed) == 1 and not report.ok  # eagerly the gradient is right
    compiled = failed[0]
    assert compiled.check == "compiled" and XLA in compiled.message
    assert str(compiled.location).endswith(f"xla_complex.py:{line}")
    assert compiled.cause is not None and compiled.cause.mistake == "tensorflow-gradient"
    message = compiled.message
    assert "TensorFlow's gradient under XLA (jit_compile=True) is at fault, not your code" in (
        message)
    assert f"gradient of {called} leaves out the conjugate" in message
    assert f"workaround: compute it as {exact}, whose gradient XLA gets right" in message


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_real_loss_through_a_complex_sqrt_on_the_cut_gets_the_real_arithmetic_fix(
        dtype: str) -> None:
    """quentintanguy/angular_spectrum's kz = sqrt(0j + k² - kx²): evanescent waves flip."""
    report = gradcheck.check(fixture_target("xla_complex", "transfer"), dtype=dtype)
    compiled = next(c for c in _compiled(report) if c.failed)
    assert XLA in compiled.message and compiled.input == "k_x"
    assert str(compiled.location).endswith("xla_complex.py:37")
    assert "gradient of tf.sqrt(z) leaves out the conjugate" in compiled.message
    assert "compute the root in real arithmetic" in compiled.message
    assert [c.check for c in report.checks if c.failed] == ["compiled"]


@pytest.mark.parametrize(("function", "dtype"), [
    ("root_as_power", "float32"), ("root_as_power", "float64"),
    ("transfer_in_reals", "float32"), ("transfer_in_reals", "float64")])
def test_the_spellings_xla_gets_right_pass(function: str, dtype: str) -> None:
    report = gradcheck.check(fixture_target("xla_complex", function), dtype=dtype)
    assert not [c.message for c in report.checks if c.failed]
    assert [c.status for c in _compiled(report)] == ["pass", "pass"]
