"""The compiled check: the VJP eagerly, under tf.function and under XLA."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import gradcheck
from gradcheck.report import CheckResult, Report

from .conftest import fixture_target


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
