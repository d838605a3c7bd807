"""A TensorFlow function whose own gradient is a tf.custom_gradient of TensorFlow's, wrong for
complex inputs (tf.nn.silu), is named as TensorFlow's, at the user's line that calls it, with
the workaround (fixtures/tensorflow_custom_gradients.py)."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck.report import Kind, Mistake, Status
from tests.conftest import fixture_module

CASES = [("silu", 13), ("keras_swish", 22), ("complex_dense", 32)]


@pytest.mark.parametrize(("name", "line"), CASES)
def test_tensorflow_s_own_custom_gradient_is_named_as_tensorflow_s(name: str, line: int
                                                                    ) -> None:
    module = fixture_module("tensorflow_custom_gradients")
    report = gradcheck.check(getattr(module, name), *getattr(module, f"{name}_inputs"),
                             compiled=False)
    assert not report.ok
    failed = [c for c in report.checks if c.failed]
    assert {c.check for c in failed} >= {Kind.JACOBIAN, Kind.VJP}
    assert not [c for c in report.checks if c.check == Kind.CUSTOM_GRADIENT]
    for result in failed:
        assert result.cause is not None and result.cause.mistake == Mistake.TENSORFLOW_GRADIENT
        assert result.location is not None and result.location.line == line
    said = str(report)
    assert "TensorFlow's own gradient of tf.nn.silu (tf.nn.swish) is wrong for complex" in said
    assert "not yours" in said and "conjugate" in said and "x * tf.math.sigmoid(x)" in said


@pytest.mark.parametrize(("name", "dtype"), [("written_out", None), ("real_silu", np.float32),
                                             ("real_silu", np.float64)])
def test_the_written_out_and_real_forms_pass(name: str, dtype: type | None) -> None:
    module = fixture_module("tensorflow_custom_gradients")
    inputs = getattr(module, f"{name}_inputs")
    if dtype is not None:
        inputs = tuple(np.asarray(v, dtype) for v in inputs)
    report = gradcheck.check(getattr(module, name), *inputs, compiled=False)
    assert report.ok and all(c.status == Status.PASS for c in report.checks)
