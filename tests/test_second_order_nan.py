"""NaN in a second derivative is located at the op and the user's line, with a fix for second
derivatives, instead of advice about a nested custom gradient that does not exist
(fixtures/second_order_nan.py)."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck.evidence.non_finite import NonFiniteSeen
from gradcheck.report import Kind, Status
from tests.conftest import fixture_module

NESTED = "a nested custom gradient's second derivative is wrong"


def _check(name: str, **options: object) -> gradcheck.Report:
    module = fixture_module("second_order_nan")
    return gradcheck.check(getattr(module, name), *getattr(module, f"{name}_inputs"),
                           compiled=False, **options)


@pytest.mark.parametrize(("name", "line", "options"), [
    ("polynomial", 12, {"order": 2}),
    ("potential", 37, {"kinds": ["hessian", "non-finite", "jacobian"]})])
def test_a_nan_second_derivative_is_located(name: str, line: int,
                                            options: dict[str, object]) -> None:
    report = _check(name, **options)
    seen = [c for c in report.checks if isinstance(c.evidence, NonFiniteSeen)]
    assert len(seen) == 1 and seen[0].evidence.order == 2
    assert seen[0].location is not None and seen[0].location.line == line
    second = [c for c in report.checks if c.check in (Kind.SECOND_ORDER, Kind.HESSIAN)]
    assert second and all(c.failed for c in second)
    assert all(c.location is not None and c.location.line == line for c in second)
    # The gradient itself is right.
    assert all(c.status == Status.PASS for c in report.checks if c.check == Kind.JACOBIAN)
    said = str(report)
    assert NESTED not in said
    assert "the second derivative of Pow" in said
    assert "where second derivatives are needed" in said and "x * x" in said


def test_a_norm_at_zero_under_hessian_names_sqrt_not_a_custom_gradient() -> None:
    report = _check("norm", kinds=["hessian", "non-finite", "jacobian"])
    hessian = [c for c in report.checks if c.check == Kind.HESSIAN]
    assert hessian and all(c.failed and c.location is not None and c.location.line == 28
                           for c in hessian)
    assert NESTED not in str(report) and "Sqrt (inside norm)" in str(report)
    # NaN against NaN is no asymmetry: the NaN is told once, as the non-finite value it is.
    assert "but nan" not in str(report) and "symmetric" not in str(report)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_products_pass_to_second_order(dtype: type) -> None:
    module = fixture_module("second_order_nan")
    report = gradcheck.check(module.polynomial_products, module.polynomial_inputs[0].astype(dtype),
                             compiled=False, order=2)
    assert report.ok and all(c.status == Status.PASS for c in report.checks)


def test_a_jvp_without_verdict_at_a_nan_gradient_has_the_op_s_line() -> None:
    report = _check("norm", kinds=["jvp", "non-finite", "jacobian"])
    jvp = [c for c in report.checks if c.check == Kind.JVP]
    assert jvp and all(c.status == Status.SKIP for c in jvp)
    assert all(c.location is not None and c.location.line == 28 for c in jvp)
