"""A tf.where whose gradient is NaN under XLA only (real reports: tensorflow/tensorflow#118674,
the tf.where documentation note of #38467): the compiled finding is at the tf.where's line,
says TensorFlow's (XLA's) gradient is at fault, and gives the inner-where guard; the guarded
spelling passes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import gradcheck
from gradcheck.report import CheckResult, Report

from .conftest import fixture_target

XLA = "tf.function(jit_compile=True)"


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
    import tensorflow as tf

    fixture_target("eager_functions_at_import", "sqrt_guard")
    tf.config.run_functions_eagerly(True)
    try:
        yield
    finally:
        tf.config.run_functions_eagerly(False)


@pytest.mark.usefixtures("functions_run_eagerly")
def test_compiled_checks_compile_where_the_module_runs_functions_eagerly() -> None:
    import tensorflow as tf

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
