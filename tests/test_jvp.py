"""The jvp check: forward mode against reverse mode."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck.options import COMMAND_KINDS
from tests.conftest import details, fixture_module


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
    module = fixture_module("custom_gradient_wrong_values")  # grad_fn sigmoid(-x), not sigmoid(x)
    # With every element equal, whatever the random u and v: forward mode differentiates the
    # real forward ops, sigmoid(x) Σ uᵢvᵢ, reverse mode runs the grad_fn, sigmoid(-x) Σ uᵢvᵢ;
    # their ratio is sigmoid(x) / sigmoid(-x) = eˣ.
    report = gradcheck.check(module.softplus, [0.5, 0.5, 0.5], kinds=frozenset({"jvp"}))
    (result,) = _jvp(report)
    assert (result.check, result.status, result.input, result.output) == ("jvp", "fail", "x", "y")
    forward, reverse = details(result)["forward"], details(result)["reverse"]
    assert forward / reverse == pytest.approx(np.exp(0.5), rel=1e-9)
    assert result.max_abs_err == pytest.approx(abs(forward - reverse), rel=1e-12)
    assert result.max_abs_err > 1e6 * details(result)["allowed"]
    assert (f"forward mode (ForwardAccumulator) gives ⟨u, Jv⟩ = {forward:.6g} but reverse mode"
            f" (tape.gradient) gives ⟨Jᵀu, v⟩ = {reverse:.6g} for x") in result.message
    assert not report.ok and report.exit_code == 1


def test_a_grad_fn_of_the_wrong_shape_is_skipped_not_compared() -> None:
    module = fixture_module("custom_gradient_full_jacobian")
    report = gradcheck.check(module.f, *module.f_inputs)
    (result,) = _jvp(report)
    assert result.status == "skip"
    assert any(c.check == "grad-shape" and c.status == "fail" for c in report.checks)


def test_jvp_belongs_to_the_check_command_only() -> None:
    assert "jvp" in COMMAND_KINDS["check"]
    assert "jvp" not in COMMAND_KINDS["jacobian"] and "jvp" not in COMMAND_KINDS["vjp"]
