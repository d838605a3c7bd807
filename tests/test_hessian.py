"""`gradcheck hessian`: the Hessian of a scalar f by nested tapes against central differences
of its gradient, block by block or through Hessian-vector products, and its symmetry."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result

from gradcheck.options import options_from
from gradcheck.pipeline import TargetRequest, check_request
from gradcheck.report import CheckResult, Report

from .conftest import FIXTURES, details, fixture_module, notes

Run = Callable[..., Result]
SOURCE = (FIXTURES / "hessian.py").read_text().splitlines()


def _line(text: str) -> str:
    """fixtures/hessian.py:N of the line holding `text`."""
    return f"hessian.py:{next(i for i, line in enumerate(SOURCE, 1) if text in line)}"


def _hessian(function: str, **settings: object) -> Report:
    options = options_from("hessian", {"order": 2, **settings})
    return check_request(TargetRequest(f"{FIXTURES / 'hessian.py'}:{function}"), options)


def _found(report: Report, kind: str = "hessian") -> list[CheckResult]:
    return [c for c in report.checks if c.check == kind]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("function", ["softplus_sum", "log_sum_exp", "quadratic"])
def test_correct_hessians_pass(function: str, dtype: str) -> None:
    report = _hessian(function, dtype=dtype)
    found = _found(report)
    assert report.ok and [c.status for c in found] == ["pass", "pass"]
    block, symmetry = found
    assert (block.input, block.output) == ("x", "dy/dx")
    assert "symmetric" in symmetry.message and symmetry.input is None
    assert block.max_rel_err is not None and block.max_rel_err < (1e-8 if dtype == "float64"
                                                                  else 1e-3)


def test_the_hessian_of_a_quadratic_form_is_a_plus_a_transposed() -> None:
    a = np.asarray(fixture_module("hessian").A)
    (block, _) = _found(_hessian("quadratic"))
    np.testing.assert_allclose(details(block)["autodiff"], a + a.T, rtol=1e-12)
    np.testing.assert_allclose(details(block)["finite_difference"], a + a.T, rtol=1e-8)


def test_the_blocks_of_two_inputs_and_their_cross_blocks() -> None:
    report = _hessian("two_inputs")
    found = _found(report)
    assert report.ok and all(c.status == "pass" for c in found)
    assert {(c.input, c.output) for c in found if c.input} == {
        ("x", "dy/dx"), ("w", "dy/dx"), ("x", "dy/dw"), ("w", "dy/dw")}
    cross = {(c.input, c.output): np.asarray(details(c)["autodiff"]) for c in found if c.input}
    np.testing.assert_allclose(cross[("w", "dy/dx")], cross[("x", "dy/dw")].T, rtol=1e-12)


def test_variables_f_reads_are_not_moved_for_the_hessian() -> None:
    report = _hessian("with_variable")
    assert report.ok and [c.input for c in _found(report)] == ["x", None]
    assert any("with respect to the arguments only: SCALE" in note for note in notes(report))
    (block, _) = _found(report)
    np.testing.assert_allclose(np.diag(details(block)["autodiff"]),
                               -1.5 * np.sin([0.3, -1.2, 0.7]), rtol=1e-12)


def test_a_grad_fn_through_numpy_has_no_hessian_at_its_line() -> None:
    report = _hessian("numpy_inside")
    (block,) = [c for c in _found(report) if c.failed]
    grad_fn = _line("lambda u: u * tf.constant(2.0 * x.numpy())")
    assert str(block.location).endswith(grad_fn)
    assert block.cause is not None and block.cause.mistake == "second-order-none"
    assert "autodiff returns None" in block.message and "nest a tf.custom_gradient" in block.message
    assert "custom_gradient square_numpy" in block.message
    (site,) = _found(report, "second-order")
    assert site.status == "fail" and str(site.location).endswith(grad_fn)
    assert site.message.startswith("custom_gradient square_numpy (line")
    assert "is not differentiable" in site.message
    # The first-order gradient is right: only the second derivative fails.
    assert {c.check for c in report.checks if c.failed} == {"hessian", "second-order"}


def test_a_second_derivative_off_by_a_factor_is_named() -> None:
    report = _hessian("wrong_second")
    (block,) = [c for c in _found(report) if c.failed]
    assert block.cause is not None and block.cause.mistake == "factor"
    assert "off by a constant factor of 2" in block.message
    assert str(block.location).endswith(
        _line("lambda u: u * _sigmoid_gradient(x, 2.0)"))
    autodiff = np.asarray(details(block)["autodiff"])
    fd = np.asarray(details(block)["finite_difference"])
    np.testing.assert_allclose(autodiff, 2.0 * fd, rtol=1e-6, atol=1e-9)
    assert block.excess is not None and block.excess > 1e3


def test_an_asymmetric_second_derivative_is_a_finding() -> None:
    report = _hessian("asymmetric")
    (symmetry,) = [c for c in _found(report) if c.cause and c.cause.mistake == "asymmetric"]
    assert symmetry.status == "fail" and "is not symmetric" in symmetry.message
    assert "∂²/∂x[1]∂x[2] = 2.5 but ∂²/∂x[2]∂x[1] = 0.5" in symmetry.message
    # At the grad_fn that uses the nested custom gradient; that one is found wrong on its own.
    assert str(symmetry.location).endswith(
        _line("return u * gradient(x)"))
    (inner,) = [c for c in report.checks if c.check == "custom-gradient" and c.failed]
    assert str(inner.location).endswith(
        _line("lambda v: tf.linalg.matvec(b, v, transpose_a=True)"))


def test_a_large_input_is_checked_by_hessian_vector_products() -> None:
    report = _hessian("large")
    (block, symmetry) = _found(report)
    assert report.ok and block.status == "pass" and block.input == "x"
    assert symmetry.status == "pass" and "symmetric along random directions" in symmetry.message
    assert "fast mode" in details(block)["mode_reason"] or "fast" in " ".join(notes(report))
    assert details(block)["probes"] == 8 and not details(block)["failed_probes"]


def test_hessian_vector_products_narrow_a_wrong_element_down() -> None:
    report = _hessian("large_wrong", mode="fast")
    (block,) = [c for c in _found(report) if c.failed]
    assert block.worst_index == (1234,) and "x[1234]" in block.message
    assert str(block.location).endswith(
        _line("return u * first(x)"))


def test_cli_prints_the_hessian_next_to_finite_differences(run_cli: Run) -> None:
    result = run_cli(["hessian", str(FIXTURES / "hessian.py") + ":quadratic"])
    assert result.exit_code == 0, result.output
    assert "d(dy/dx)/dx  shape (3, 3)" in result.output
    assert "autodiff (nested tapes)" in result.output
    assert "OK " in result.output


def test_cli_json_and_exit_code_of_a_wrong_hessian(run_cli: Run) -> None:
    result = run_cli(["hessian", str(FIXTURES / "hessian.py") + ":wrong_second",
                      "--format", "json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["exit_code"] == 1 and not data["ok"]
    failed = [c for c in data["checks"] if c["check"] == "hessian" and c["status"] == "fail"]
    assert failed and failed[0]["cause"]["mistake"] == "factor"
    assert failed[0]["location"].endswith(_line("lambda u: u * _sigmoid_gradient(x, 2.0)"))


def test_cli_junit(run_cli: Run) -> None:
    result = run_cli(["hessian", str(FIXTURES / "hessian.py") + ":softplus_sum",
                      "--format", "junit"])
    assert result.exit_code == 0 and "<testsuite" in result.stdout


def test_a_vector_output_is_a_usage_error(run_cli: Run) -> None:
    result = run_cli(["hessian", str(FIXTURES / "hessian.py") + ":vector_valued"])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: gradcheck hessian needs a scalar output")
    assert "y of shape (3,)" in line and "--order 2" in line
    json_result = run_cli(["hessian", str(FIXTURES / "hessian.py") + ":vector_valued",
                           "--format", "json"])
    assert json.loads(json_result.stdout)["exit_code"] == 2


def test_fast_mode_finds_an_asymmetric_second_derivative() -> None:
    report = _hessian("asymmetric", mode="fast")
    (symmetry,) = [c for c in _found(report) if c.cause and c.cause.mistake == "asymmetric"]
    assert symmetry.status == "fail" and "⟨w, H v⟩ =" in symmetry.message
    assert symmetry.excess is not None and symmetry.excess > 1e3
    assert str(symmetry.location).endswith(
        _line("return u * gradient(x)"))


def test_fast_mode_passes_a_symmetric_hessian() -> None:
    report = _hessian("two_inputs", mode="fast")
    assert report.ok
    assert any("symmetric along random directions" in c.message for c in _found(report))


def test_hessian_is_a_configurable_command(tmp_path: Path) -> None:
    from gradcheck.load.config import load_config

    (tmp_path / "pyproject.toml").write_text(
        '[tool.gradcheck]\n[[tool.gradcheck.check]]\ntarget = "m:f"\ncommand = "hessian"\n')
    (check,) = load_config(str(tmp_path / "pyproject.toml")).checks
    options = check.options
    assert "hessian" in options.kinds and "vjp" not in options.kinds and options.order == 2
