"""Judge the grad_fn TensorFlow runs: a decorator around the function
handed to tf.custom_gradient, around grad_fn, on a method, under tf.function, changing the
output: the site fails at a line, and a custom-gradient PASS never stands beside a failing
jacobian, vjp or jvp without a location."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import gradcheck
from gradcheck.report import Report

from .conftest import fixture_module

MODULE = "decorated_custom_gradients"
EXPLAINED = {"jacobian", "vjp", "jvp"}

# (function, the line the custom-gradient failure names)
WRONG = [("square", 20), ("cube", 36), ("method", 20), ("traced", 20), ("tripled", 81)]


def _report(function: str, dtype: Any = np.float64) -> Report:
    module = fixture_module(MODULE)
    inputs = [np.asarray(v, dtype) for v in getattr(module, f"{function}_inputs")()]
    return gradcheck.check(getattr(module, function), *inputs, compiled=False)


def assert_no_contradiction(report: Report) -> None:
    """The invariant: custom-gradient PASS beside an unlocated jacobian/vjp/jvp FAIL."""
    passing = [c for c in report.checks if c.check == "custom-gradient" and not c.failed
               and c.status == "pass"]
    unlocated = [c for c in report.checks if c.check in EXPLAINED and c.failed
                 and c.location is None]
    assert not (passing and unlocated), str(report)
    if any(c.check in EXPLAINED and c.failed for c in report.checks):
        assert not passing, str(report)


@pytest.mark.parametrize(("function", "line"), WRONG)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_decorated_grad_fn_fails_at_a_line(function: str, line: int, dtype: Any) -> None:
    report = _report(function, dtype)
    [site] = [c for c in report.checks if c.check == "custom-gradient"]
    assert site.failed and site.location is not None and site.location.line == line
    for result in report.checks:
        if result.check in EXPLAINED and result.failed:
            assert result.location == site.location, result.message
    assert_no_contradiction(report)


def test_decorator_outside_custom_gradient_passes() -> None:
    report = _report("outside")
    assert report.ok, str(report)
    assert_no_contradiction(report)


def test_invariant_catches_the_false_pass() -> None:
    """The invariant check fails on the report the issue describes (hand-built from a real
    one: the site's verdict turned to PASS, the Jacobian's location removed)."""
    import dataclasses

    from gradcheck.report import Status

    report = _report("square")
    forged = tuple(
        dataclasses.replace(c, status=Status.PASS) if c.check == "custom-gradient" else
        dataclasses.replace(c, location=None) if c.check in EXPLAINED else c
        for c in report.checks)
    with pytest.raises(AssertionError):
        assert_no_contradiction(dataclasses.replace(report, checks=forged))


GENERIC = "generic_custom_gradient_wrappers"
# A library's decorator factory (geomstats) hands TensorFlow its own (*args) wrapper: the site
# is the user's function, and the line the user's gradient function, not the library's.
# (function, the site's name and line, the grad_fn line the failures name)
GENERIC_WRONG = [("made_up", "made_up (line 57)", {"x": 53}),
                 ("two_made_up", "two_made_up (line 80)", {"x": 72, "y": 76}),
                 ("half_sin", "half_sin (line 94)", {"x": 90}),
                 ("weighted_normalized", "normalized (line 128)", {"x": 133})]


def _generic_report(function: str) -> Report:
    module = fixture_module(GENERIC)
    inputs = [np.asarray(v, np.float64) for v in getattr(module, f"{function}_inputs")]
    return gradcheck.check(getattr(module, function), *inputs, compiled=False)


@pytest.mark.parametrize(("function", "site", "lines"), GENERIC_WRONG)
def test_a_library_wrapper_names_the_users_function_and_gradient(
        function: str, site: str, lines: dict[str, int]) -> None:
    report = _generic_report(function)
    failed = [c for c in report.checks if c.check == "custom-gradient"]
    assert failed and all(c.failed for c in failed), str(report)
    # Each input's own gradient function (geomstats takes one per input).
    assert {c.input: c.location.line for c in failed if c.location} == lines, str(report)
    for result in report.checks:
        if result.failed:
            assert result.location is not None, str(report)
            assert result.location.line in lines.values(), str(report)
    assert f"custom_gradient {site}" in failed[0].message
    assert failed[0].input == "x"  # named as the user's function names it, not args[0]
    assert_no_contradiction(report)


def test_sites_made_by_one_library_wrapper_stay_apart() -> None:
    report = _generic_report("both")
    sites = {c.message.split(":")[0]: c.status for c in report.checks
             if c.check == "custom-gradient"}
    assert sites == {"custom_gradient made_up (line 57)": "fail",
                     "custom_gradient squared_norm (line 66)": "pass"}, str(report)


@pytest.mark.parametrize("function", ["squared_norm", "log1pexp"])
def test_right_gradients_behind_library_wrappers_pass(function: str) -> None:
    report = _generic_report(function)
    assert report.ok, str(report)


def test_a_grad_fn_tensorflow_refuses_for_its_variables_is_the_first_finding() -> None:
    # The user's own run raises TypeError before any value exists: that comes first, before
    # the values gradcheck measured on its repair of the grad_fn (here also clipped).
    layer = fixture_module("layer_method_custom_gradient")
    x = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float32)
    report = gradcheck.check(layer.f, x)
    first = report.sorted_checks()[0]
    assert first.check == "custom-gradient" and first.cause is not None, str(report)
    assert first.cause.mistake == "variables", str(report)
    assert "variables=None" in first.message and "clipped_linear" in first.message
    assert str(first.location).endswith("layer_method_custom_gradient.py:21"), str(report)
