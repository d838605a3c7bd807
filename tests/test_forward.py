"""The jvp check: forward mode against reverse mode."""

from __future__ import annotations

import numpy as np

import gradcheck
from gradcheck.checks import COMMAND_KINDS
from tests.conftest import fixture_module


def _jvp(report: gradcheck.Report) -> list[gradcheck.CheckResult]:
    return [c for c in report.checks if c.check == "jvp"]


def test_forward_and_reverse_agree_for_a_correct_function() -> None:
    module = fixture_module("two_in_two_out")
    report = gradcheck.check(module.f, *module.f_inputs)
    results = _jvp(report)
    assert results and all(r.status == "pass" for r in results)
    assert all(r.max_abs_err is not None and r.max_abs_err < 1e-12 for r in results)
    assert {r.input for r in results} == {s.name for s in report.inputs if s.differentiable}


def test_a_wrong_grad_fn_makes_the_modes_disagree() -> None:
    module = fixture_module("custom_gradient_wrong_values")
    report = gradcheck.check(module.softplus, *module.softplus_inputs, kinds=frozenset({"jvp"}))
    (result,) = _jvp(report)
    assert result.status == "fail"
    x = np.array(module.softplus_inputs[0])
    # Forward mode differentiates the real forward ops: sigmoid(x), the correct derivative.
    assert "ForwardAccumulator" in result.message
    assert result.details["forward"] != result.details["reverse"]
    assert np.isfinite(result.details["forward"]) and x.size == 3


def test_a_grad_fn_of_the_wrong_shape_is_skipped_not_compared() -> None:
    module = fixture_module("custom_gradient_full_jacobian")
    report = gradcheck.check(module.f, *module.f_inputs)
    (result,) = _jvp(report)
    assert result.status == "skip"
    assert any(c.check == "grad-shape" and c.status == "fail" for c in report.checks)


def test_jvp_belongs_to_the_check_command_only() -> None:
    assert "jvp" in COMMAND_KINDS["check"]
    assert "jvp" not in COMMAND_KINDS["jacobian"] and "jvp" not in COMMAND_KINDS["vjp"]
