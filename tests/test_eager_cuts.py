"""Cuts found in the ops f runs eagerly: a loss that tf.function cannot
trace (a Python `if` on a value, .numpy(), float()) gets the graph-break its op deserves, at
that op's line, as a traceable one does; a correct eager-only loss passes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from click.testing import Result

import gradcheck
from gradcheck.report import CheckResult, Report

from .conftest import fixture_module, fixture_target

MODULE = "eager_only_cuts"


def _breaks(report: Report) -> list[CheckResult]:
    return [c for c in report.checks if c.check == "graph-break"]


def _lines(report: Report) -> set[int]:
    return {c.location.line for c in _breaks(report) if c.location and c.location.line}


# (function, the cut's line, its op's words, the line where tracing stopped, not the cause)
EAGER_CUTS = [
    ("iou_rounded", 34, "Round on the path", 38),
    ("argmax_step_loss", 54, "constant (tf.argmax)", 55),
    ("problematic_loss", 87, "compares values (>)", 84),
]


@pytest.mark.parametrize(("function", "line", "words", "trace_stop"), EAGER_CUTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eager_only_loss_names_the_op_without_gradient(function: str, line: int, words: str,
                                                       trace_stop: int, dtype: Any) -> None:
    module = fixture_module(MODULE)
    inputs = [np.asarray(v, dtype) for v in getattr(module, f"{function}_inputs")()]
    report = gradcheck.check(getattr(module, function), *inputs, compiled=False)
    [cut] = [c for c in _breaks(report) if c.failed]
    assert cut.location is not None and cut.location.line == line, cut.message
    assert words in cut.message
    assert trace_stop not in _lines(report)
    assert not report.ok


def test_eager_only_and_traced_loss_get_the_same_finding() -> None:
    eager = gradcheck.check(fixture_target(MODULE, "problematic_loss"), compiled=False)
    traced = gradcheck.check(fixture_target("real_no_gradients", "problematic_loss"),
                             compiled=False)
    [eager_cut], [traced_cut] = _breaks(eager), _breaks(traced)
    assert eager_cut.cause is not None and traced_cut.cause is not None
    assert eager_cut.cause.mistake == traced_cut.cause.mistake == "comparison"


def test_cli_names_the_eager_only_cut(run_cli: Callable[..., Result]) -> None:
    result = run_cli(["check", fixture_target(MODULE, "iou_rounded"), "--no-compiled",
                      "--format", "json"])
    assert result.exit_code == 1, result.output
    assert "eager_only_cuts.py:34" in result.output
    assert "Round on the path" in result.output


def test_correct_eager_only_loss_passes() -> None:
    report = gradcheck.check(fixture_target(MODULE, "iou"), compiled=False)
    assert report.ok, str(report)
    assert not _breaks(report)


@pytest.mark.parametrize(("function", "line"), [("histogram_loss", 72), ("numpy_loss", 100)])
def test_value_leaving_tensorflow_is_still_the_cut(function: str, line: int) -> None:
    report = gradcheck.check(fixture_target(MODULE, function), compiled=False)
    [cut] = _breaks(report)
    assert cut.failed and cut.location is not None and cut.location.line == line, cut.message


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_count_as_a_python_number_does_not_hide_the_round(dtype: Any) -> None:
    module = fixture_module(MODULE)
    inputs = [np.asarray(v, dtype) for v in module.count_quantised_inputs()]
    report = gradcheck.check(module.count_quantised, *inputs, compiled=False)
    [cut] = _breaks(report)
    assert cut.input == "x" and cut.status == "warn" and "Round on the path" in cut.message
    assert cut.location is not None and cut.location.line == 114
