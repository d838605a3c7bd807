"""TensorFlow's own gradient wrong for complex inputs (tensorflow/tensorflow#49946, #62266,
#127713): the failing jacobian and vjp are at the op's line, say TensorFlow is at fault, and
give the written-out spelling; that spelling passes."""

from __future__ import annotations

import pytest

import gradcheck

from .conftest import fixture_target


@pytest.mark.parametrize(("function", "line", "called", "workaround", "dtype"), [
    ("det_loss", 14, "tf.linalg.det", "a * d - b * c", "float32"),
    ("det_loss", 14, "tf.linalg.det", "a * d - b * c", "float64"),
    ("squared_difference_cos", 35, "tf.math.squared_difference",
     "tf.math.real(d * tf.math.conj(d))", "float32"),
    ("xdivy", 46, "tf.math.xdivy", "x / y", "float64")])
def test_a_complex_gradient_tensorflow_gets_wrong_is_named_at_the_op(
        function: str, line: int, called: str, workaround: str, dtype: str) -> None:
    report = gradcheck.check(fixture_target("complex_wrong_gradients", function), dtype=dtype)
    failed = [c for c in report.checks if c.failed]
    assert {c.check for c in failed} == {"jacobian", "vjp"}
    for check in failed:
        assert str(check.location).endswith(f"complex_wrong_gradients.py:{line}")
        assert check.cause is not None and check.cause.mistake == "tensorflow-gradient"
        assert f"TensorFlow's own gradient of {called} is wrong for complex inputs" in (
            check.message)
        assert "not your code" in check.message and workaround in check.message


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_determinant_written_out_passes(dtype: str) -> None:
    report = gradcheck.check(fixture_target("complex_wrong_gradients", "det_loss_written_out"),
                             dtype=dtype)
    assert not [c.message for c in report.checks if c.failed]
