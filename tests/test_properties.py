"""Property tests: correct gradients never fail; a gradient off by a known amount always does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import gradcheck
from gradcheck.engine.runtime import tensorflow

tf = tensorflow()

SETTINGS = settings(max_examples=15, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def sin_times_x(x: Any) -> Any:
    return tf.sin(x) * x


def softplus(x: Any) -> Any:
    return tf.math.softplus(x)


def sum_of_squares(x: Any) -> Any:
    return tf.reduce_sum(x * x)


def projection(x: Any) -> Any:
    flat = tf.reshape(x, [-1])
    n = int(flat.shape[0])
    matrix = tf.constant(np.cos(np.arange(2 * n).reshape(2, n)), dtype=x.dtype)
    return tf.linalg.matvec(matrix, flat)


def two_outputs(x: Any) -> Any:
    return tf.exp(x / 4.0), tf.tanh(x)


@tf.custom_gradient
def cubic(x: Any) -> Any:
    def grad_fn(upstream: Any) -> Any:
        return upstream * 3.0 * x * x

    return x * x * x, grad_fn


def off_by(delta: float) -> Callable[[Any], Any]:
    """sin(x)·x with a grad_fn whose derivative is off by exactly delta everywhere."""

    @tf.custom_gradient
    def wrong(x: Any) -> Any:
        def grad_fn(upstream: Any) -> Any:
            return upstream * (tf.cos(x) * x + tf.sin(x) + delta)

        return tf.sin(x) * x, grad_fn

    return wrong


CORRECT: dict[str, tuple[Callable[[Any], Any], Callable[[tuple[int, ...]], list[tuple[int, ...]]]]]
CORRECT = {
    "sin_times_x": (sin_times_x, lambda s: [s]),
    "softplus": (softplus, lambda s: [s]),
    "sum_of_squares": (sum_of_squares, lambda s: [()]),
    "projection": (projection, lambda s: [(2,)]),
    "two_outputs": (two_outputs, lambda s: [s, s]),
    "cubic_custom_gradient": (cubic, lambda s: [s]),
}

shapes = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)
dtypes = st.sampled_from(["float32", "float64"])
elements = st.floats(-2.0, 2.0, allow_nan=False, width=32)


def points(shape: tuple[int, ...], dtype: str) -> st.SearchStrategy[np.ndarray]:
    return arrays(dtype, shape, elements=elements)


@st.composite
def upstreams(draw: st.DrawFn, output_shapes: list[tuple[int, ...]]) -> Any:
    kind = draw(st.sampled_from(["default", "ones", "random", "explicit"]))
    if kind == "default":
        return None
    if kind in ("ones", "random"):
        return kind
    return [draw(arrays("float64", shape, elements=elements)) for shape in output_shapes]


@st.composite
def correct_cases(draw: st.DrawFn) -> tuple[str, np.ndarray, str, Any]:
    name = draw(st.sampled_from(sorted(CORRECT)))
    shape, dtype = draw(shapes), draw(dtypes)
    x = draw(points(shape, dtype))
    return name, x, dtype, draw(upstreams(CORRECT[name][1](shape)))


def failing(report: gradcheck.Report) -> list[gradcheck.CheckResult]:
    return [result for result in report.checks if result.status in ("fail", "error")]


@SETTINGS
@given(correct_cases())
def test_correct_gradients_never_fail(case: tuple[str, np.ndarray, str, Any]) -> None:
    name, x, dtype, upstream = case
    report = gradcheck.check(CORRECT[name][0], x, upstream=upstream, dtype=dtype)
    assert failing(report) == [], report
    assert report.ok and report.exit_code == 0
    assert {"jacobian", "vjp"} <= {result.check for result in report.checks}


@SETTINGS
@given(shape=shapes, dtype=dtypes, data=st.data(),
       delta=st.sampled_from([0.05, -0.2, 1.0]))
def test_a_gradient_off_by_delta_always_fails(shape: tuple[int, ...], dtype: str,
                                              data: st.DataObject, delta: float) -> None:
    x = data.draw(points(shape, dtype))
    upstream = data.draw(upstreams([shape]))
    report = gradcheck.check(off_by(delta), x, upstream=upstream, dtype=dtype)
    assert not report.ok and report.exit_code == 1
    sized = [r.max_abs_err for r in failing(report) if r.max_abs_err is not None]
    # The Jacobian is off by delta on its diagonal: some finding measures exactly that.
    assert any(err == pytest.approx(abs(delta), rel=0.05) for err in sized), report
