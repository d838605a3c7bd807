"""The compiled check: the VJP eagerly, under tf.function and under XLA; and what differs
under XLA only, named at the op's line: an unconjugated complex gradient (Sqrt, Rsqrt,
Reciprocal) with the spelling XLA gets right, f's own values XLA computes otherwise (fuzzing
reports tensorflow/tensorflow#62263, #62268, #58752), and a tf.where whose gradient is NaN under
XLA only (tensorflow/tensorflow#118674, the tf.where documentation note of #38467) with the
inner-where guard, which passes."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import tensorflow as tf

import gradcheck
from gradcheck.report import CheckResult, Report

from .conftest import fixture_target

XLA = "tf.function(jit_compile=True)"


def _compiled(report: Report) -> list[CheckResult]:
    return [c for c in report.checks if c.check == "compiled"]


@pytest.mark.parametrize(("function", "line", "words"), [
    ("numpy_inside", 6, "'SymbolicTensor' object has no attribute 'numpy'"),
    ("variable_per_call", 9, "singleton tf.Variables created on the first call"),
])
def test_untraceable_gradients_warn_at_the_users_line(function: str, line: int,
                                                      words: str) -> None:
    report = gradcheck.check(fixture_target("compiled_parity", function))
    compiled = _compiled(report)
    assert [c.status for c in compiled] == ["warn"]
    assert compiled[0].location is not None
    assert str(compiled[0].location).endswith(f"compiled_parity.py:{line}")
    assert words in compiled[0].message and "eagerly only" in compiled[0].message


def test_xla_without_a_kernel_is_a_skip_naming_the_op() -> None:
    report = gradcheck.check(fixture_target("compiled_parity", "py_func"))
    statuses = [(c.status, c.message) for c in _compiled(report)]
    assert statuses[0][0] == "pass"
    assert statuses[1][0] == "skip" and statuses[1][1].startswith(
        "XLA cannot compile the VJP: no XLA kernel for EagerPyFunc; the op: EagerPyFunc at ")
    assert str(_compiled(report)[1].location).endswith("compiled_parity.py:13")
    assert report.ok


def test_compiled_modes_agree_on_a_tf_function() -> None:
    report = gradcheck.check(fixture_target("compiled_parity", "traced_layer"))
    compiled = _compiled(report)
    assert [c.status for c in compiled] == ["pass", "pass"]
    assert all(c.max_abs_err is not None and c.max_abs_err < 1e-12 for c in compiled)


def test_python_control_flow_is_converted_as_tf_function_converts_it() -> None:
    """f goes through AutoGraph (gradcheck's own code does not): no untraceable warning."""
    report = gradcheck.check(fixture_target("compiled_parity", "python_control_flow"))
    compiled = _compiled(report)
    assert [c.status for c in compiled] == ["pass", "pass"]
    assert "tf.function matches the eager one" in compiled[0].message
    assert report.ok


def test_a_compiled_only_difference_fails() -> None:
    """A gradient that differs inside tf.function (tf.executing_eagerly() branches)."""

    @tf.custom_gradient
    def mode_dependent(x: tf.Tensor) -> tuple[tf.Tensor, object]:
        def grad(upstream: tf.Tensor) -> tf.Tensor:
            scale = 1.0 if tf.executing_eagerly() else 1.5
            return upstream * tf.cos(x) * scale

        return tf.sin(x), grad

    report = gradcheck.check(mode_dependent, np.array([0.5, 1.0]))
    compiled = _compiled(report)
    assert [c.status for c in compiled] == ["fail", "fail"]
    assert "under tf.function differs from the eager one" in compiled[0].message
    assert compiled[0].worst_index is not None


# XLA leaves the gradient of a complex Sqrt, Rsqrt or Reciprocal unconjugated (eager
# TensorFlow and finite differences agree).

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


# f's own values differ under XLA.

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


# A tf.where whose gradient is NaN under XLA only.

def _xla(report: Report) -> CheckResult:
    return next(c for c in report.checks if c.check == "compiled" and XLA in c.message)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("fixture", "function", "line"), [
    ("xla_where", "sqrt_guard", 10), ("non_finite_real", "sqrt_fork", 74)])
def test_xla_only_nan_of_a_where_is_tensorflows_at_the_where(fixture: str, function: str,
                                                             line: int, dtype: str) -> None:
    report = gradcheck.check(fixture_target(fixture, function), dtype=dtype)
    compiled = _xla(report)
    assert compiled.status == "fail" and not report.ok
    assert str(compiled.location).endswith(f"{fixture}.py:{line}")
    assert compiled.cause is not None and compiled.cause.mistake == "tensorflow-gradient"
    assert compiled.cause.culprit == "tf.where"
    message = compiled.message
    assert "TensorFlow's gradient under XLA" in message and "not your code" in message
    assert "tensorflow/tensorflow#118674" in message and "Sqrt" in message
    assert "workaround: guard the branch's input with an inner tf.where" in message
    assert "tf.sqrt(tf.where(c, v, safe))" in message
    non_finite = next(c for c in report.checks if c.check == "non-finite")
    assert "TensorFlow's (XLA's) gradient is at fault, not your code" in non_finite.message


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("function", ["sqrt_guarded", "documented_guard"])
def test_the_inner_where_guard_passes(function: str, dtype: str) -> None:
    report = gradcheck.check(fixture_target("xla_where", function), dtype=dtype)
    assert not [c.message for c in report.checks if c.status == "fail"]
    compiled = [c for c in report.checks if c.check == "compiled"]
    assert len(compiled) == 2 and all(c.status == "pass" for c in compiled)
    assert not [c for c in report.checks if c.check == "non-finite"]


def test_a_where_tie_that_xla_breaks_the_other_way_is_named_at_the_where() -> None:
    """tensorflow/tensorflow#118713: x[0, 2] equals its row's mean; XLA's mean is one ulp
    lower, so the tf.where takes the sin branch there: f itself differs, no gradient is wrong."""
    report = gradcheck.check(fixture_target("xla_where", "mean_mask"))
    compiled = _xla(report)
    assert compiled.status == "skip" and report.ok
    assert str(compiled.location).endswith("xla_where.py:20")
    message = compiled.message
    assert "takes the other branch under XLA at [0, 2]" in message
    assert "tie" in message and "not a wrong gradient" in message


def test_off_the_tie_the_same_where_passes_compiled() -> None:
    """(The report's f builds float32 weights: it runs in float32 only.)"""
    x = [[-1.0, -0.8, -0.7, -0.5, -0.4], [-0.2, -0.1, 0.05, 0.2, 0.3],
         [0.45, 0.55, 0.7, 0.85, 1.0]]
    report = gradcheck.check(fixture_target("xla_where", "mean_mask"), x, dtype="float32")
    compiled = [c for c in report.checks if c.check == "compiled"]
    assert len(compiled) == 2 and all(c.status == "pass" for c in compiled), [
        c.message for c in compiled]


@pytest.fixture
def functions_run_eagerly() -> Iterator[None]:
    """As a module that calls tf.config.run_functions_eagerly(True) at import leaves it."""
    fixture_target("eager_functions_at_import", "sqrt_guard")
    tf.config.run_functions_eagerly(True)
    try:
        yield
    finally:
        tf.config.run_functions_eagerly(False)


@pytest.mark.usefixtures("functions_run_eagerly")
def test_compiled_checks_compile_where_the_module_runs_functions_eagerly() -> None:
    report = gradcheck.check(fixture_target("eager_functions_at_import", "sqrt_guard"),
                             dtype="float32")
    compiled = _xla(report)
    assert compiled.status == "fail", str(report)
    assert str(compiled.location).endswith("eager_functions_at_import.py:45")
    assert tf.config.functions_run_eagerly()  # the module's own setting is left as it was


@pytest.mark.usefixtures("functions_run_eagerly")
def test_a_published_model_that_runs_functions_eagerly_is_checked() -> None:
    report = gradcheck.check(fixture_target("eager_functions_at_import", "mms2v"))
    assert report.ok, str(report)
    assert {c.status for c in report.checks if c.check == "compiled"} == {"pass"}


@pytest.mark.usefixtures("functions_run_eagerly")
def test_a_numpy_integrand_that_runs_only_eagerly_is_cut_at_its_line() -> None:
    report = gradcheck.check(fixture_target("eager_functions_at_import", "symgauss_sigmoid"))
    [cut] = [c for c in report.checks if c.check == "graph-break"]
    assert cut.status == "fail" and str(cut.location).endswith("eager_functions_at_import.py:64")
    compiled = [c for c in report.checks if c.check == "compiled"]
    assert compiled and all("tf.function cannot trace f" in c.message for c in compiled)


def test_tensorflows_own_graph_gradient_raising_is_named_with_the_known_workaround() -> None:
    """tensorflow/tensorflow#50170: the trace fails inside TensorFlow's gradient of tf.cond,
    at the line of the cond its graph trace recorded; the advice is that issue's workaround,
    which passes."""
    compiled = _compiled(gradcheck.check(fixture_target("custom_gradient_in_cond")))
    assert [c.status for c in compiled] == ["warn"]
    assert str(compiled[0].location).endswith("custom_gradient_in_cond.py:17")
    message = compiled[0].message
    assert "TensorFlow's gradient of If (cond_v2._IfGrad) raised AttributeError" in message
    assert "tensorflow/tensorflow#50170" in message and ".numpy()" not in message
    fixed = gradcheck.check(fixture_target("custom_gradient_in_cond", "fixed"))
    assert fixed.ok and {c.status for c in fixed.checks} == {"pass"}
