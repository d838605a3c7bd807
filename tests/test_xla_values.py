"""f whose own values differ under XLA (fuzzing reports tensorflow/tensorflow#62263, #62268,
#58752): the compiled skip names the first op XLA computes otherwise, at its line, and says
when it is TensorFlow's unconjugated complex kernel."""

from __future__ import annotations

import pytest

import gradcheck
from gradcheck.report import CheckResult, Report

from .conftest import fixture_target

XLA = "tf.function(jit_compile=True)"


def _skipped(report: Report) -> CheckResult:
    return next(c for c in report.checks if c.check == "compiled" and c.status == "skip"
                and XLA in c.message)


@pytest.mark.parametrize(("function", "line", "op"), [
    ("sqrt_grad", 14, "SqrtGrad"), ("reciprocal_grad", 27, "ReciprocalGrad")])
def test_an_unconjugated_xla_kernel_is_named_at_its_line(function: str, line: int,
                                                         op: str) -> None:
    report = gradcheck.check(fixture_target("xla_values", function))
    skipped = _skipped(report)
    assert str(skipped.location).endswith(f"xla_values.py:{line}")
    message = skipped.message
    assert f"the first op whose value XLA computes otherwise from the same inputs is {op}" in (
        message)
    assert f"TensorFlow's XLA kernel of {op} leaves out the conjugate" in message
    assert "not your code" in message


@pytest.mark.parametrize(("function", "line", "op", "why"), [
    ("cosh_cosh_tan", 41, "Tan", "or Tan amplifies rounding"),
    ("stateless_noise", 52, "StatelessRandomNormalV2",
     "a random op, whose numbers XLA draws otherwise")])
def test_an_op_xla_computes_otherwise_is_named_at_its_line(function: str, line: int, op: str,
                                                           why: str) -> None:
    report = gradcheck.check(fixture_target("xla_values", function))
    skipped = _skipped(report)
    assert str(skipped.location).endswith(f"xla_values.py:{line}")
    assert f"from the same inputs is {op} at" in skipped.message and why in skipped.message
