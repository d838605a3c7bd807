"""The grad_fn judged is the one TensorFlow calls, whatever wraps it: several
functions made by one decorator (a scale factory's constants, a decorator without
functools.wraps around different functions) are each their own custom gradient, and
tf.custom_gradient replaced at import wraps a grad_fn once, as TensorFlow runs it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import gradcheck
from gradcheck.report import Report

from .conftest import fixture_module
from .test_decorated_custom_gradients import assert_no_contradiction

DTYPES = [np.float32, np.float64]


def _report(module_name: str, function: str, dtype: Any) -> Report:
    module = fixture_module(module_name)
    inputs = [np.asarray(v, dtype) for v in getattr(module, f"{function}_inputs")()]
    return gradcheck.check(getattr(module, function), *inputs, compiled=False)


def _sites(report: Report) -> list[tuple[str, int | None]]:
    return sorted(("fail" if c.failed else "pass", c.location.line if c.location else None)
                  for c in report.checks if c.check == "custom-gradient")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("function", "failing_line"), [
    ("plain_and_reversed", 20),  # scale_gradient(-1.0)'s lambda, beside scale_gradient(1.0)
    ("two_clipped", 46),  # clip_gradient's lambda around softsign_wrong, beside softsign
])
def test_each_function_a_decorator_made_is_judged(function: str, failing_line: int,
                                                  dtype: Any) -> None:
    report = _report("wrapped_custom_gradients", function, dtype)
    [failing, passing] = _sites(report)
    assert failing == ("fail", failing_line) and passing[0] == "pass", str(report)
    for result in report.checks:
        if result.check in ("jacobian", "vjp", "jvp"):
            assert result.failed and result.location is not None, str(report)
            # Located at the failing site: the right one's PASS stands beside no unexplained FAIL.
            assert result.location.line == failing_line, str(report)


@pytest.mark.parametrize("function", ["only_plain", "two_clipped_right"])
def test_right_functions_made_by_one_decorator_pass(function: str) -> None:
    for dtype in DTYPES:
        report = _report("wrapped_custom_gradients", function, dtype)
        assert report.ok, str(report)


@pytest.fixture
def patched_module(monkeypatch: pytest.MonkeyPatch) -> Any:
    import tensorflow as tf

    monkeypatch.setattr(tf, "custom_gradient", tf.custom_gradient)  # restored afterwards
    return fixture_module("patched/custom_gradient_at_import")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("function", ["loss", "log1pexp"])
def test_custom_gradient_replaced_at_import_is_judged_as_tensorflow_runs_it(
        patched_module: Any, function: str, dtype: Any) -> None:
    point = np.asarray(patched_module.POINT, dtype)
    report = gradcheck.check(getattr(patched_module, function), point, compiled=False)
    [site] = [c for c in report.checks if c.check == "custom-gradient"]
    assert site.failed and site.location is not None and site.location.line == 22, str(report)
    # The grad_fn TensorFlow calls is scaled once (0.5), not twice (0.25).
    assert "constant factor of 0.5 " in site.message, site.message
    assert_no_contradiction(report)
