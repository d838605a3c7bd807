"""The second-order check (--order 2): the derivative of the VJP, nested tapes against
central differences of the VJP."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck.options import CheckOptions
from gradcheck.pipeline import TargetRequest, check_request
from gradcheck.report import CheckResult, Report

from .conftest import FIXTURES, details, fixture_module, notes


def _check(function: str, order: int = 2) -> Report:
    return check_request(TargetRequest(f"{FIXTURES / 'second_order.py'}:{function}"),
                         CheckOptions(order=order))


def _second(report: Report) -> list[CheckResult]:
    return [c for c in report.checks if c.check == "second-order"]


def test_a_grad_fn_through_numpy_has_no_second_derivative() -> None:
    report = _check("square_numpy")
    found = _second(report)
    assert [c.status for c in found] == ["fail"]
    assert str(found[0].location).endswith("second_order.py:7")
    assert "custom_gradient square_numpy (line 6)" in found[0].message
    assert "is not differentiable" in found[0].message and "nest a" in found[0].message
    assert {c.check for c in report.checks if c.failed} == {"second-order"}


def test_first_order_checks_alone_pass_it() -> None:
    assert _check("square_numpy", order=1).ok


def test_a_wrong_nested_second_derivative_is_named() -> None:
    found = _second(_check("softplus_bad_second"))
    assert [c.status for c in found] == ["fail"]
    assert "second derivative that is off by a constant factor of 2" in found[0].message
    assert found[0].cause is not None and found[0].cause.mistake == "factor"


@pytest.mark.parametrize("function", ["cube_nested", "smooth"])
def test_differentiable_gradients_pass(function: str) -> None:
    report = _check(function)
    assert [c.status for c in _second(report)] == ["pass"] and report.ok
    assert all(c.max_abs_err is not None and c.max_abs_err < 1e-8 for c in _second(report))


def test_a_large_input_is_checked_by_random_projections() -> None:
    """10⁴ elements: ⟨w, ∂g/∂x v⟩ against central differences, narrowed to the wrong element."""
    target = f"{FIXTURES / 'hessian.py'}:large_wrong"
    report = check_request(TargetRequest(target),
                           CheckOptions(order=2, mode="fast", compiled=False))
    found = [c for c in _second(report) if c.failed]
    assert found and all(c.worst_index == (1234,) for c in found)
    assert "x[1234]" in found[0].message and details(found[0])["probes"] == 8
    grad_fn = next(i for i, line in enumerate(
        (FIXTURES / "hessian.py").read_text().splitlines(), 1) if "return u * first(x)" in line)
    assert str(found[0].location).endswith(f"hessian.py:{grad_fn}")


def test_a_large_correct_input_passes_in_fast_mode() -> None:
    report = check_request(TargetRequest(f"{FIXTURES / 'hessian.py'}:large"),
                           CheckOptions(order=2, compiled=False))
    found = _second(report)
    assert [c.status for c in found] == ["pass"] and report.ok
    assert any("second derivatives: fast mode" in note for note in notes(report))


@pytest.mark.parametrize("order", [1, 2])
def test_second_order_keeps_a_custom_gradients_first_order_mistake(order: int) -> None:
    """--order 2 adds the second-derivative findings; it does not hide the first-order one
    (op_w's grad_fn ignores its upstream, line 16)."""
    module = fixture_module("nested_custom_gradient")
    report = gradcheck.check(module.f_workaround, np.array([0.7]), order=order)
    ignored = [c for c in report.checks if c.check == "custom-gradient" and c.failed
               and c.cause is not None and c.cause.mistake == "ignored-upstream"]
    assert [str(c.location).rsplit(":", 1)[1] for c in ignored] == ["16"], report.checks
