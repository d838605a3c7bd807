"""A grad_fn for a complex output of real inputs that forgets TensorFlow's conjugate is told
so, with the word "conjugate" and the fix (fixtures/complex_output_grad_fn.py)."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck.report import Kind, Mistake, Status
from tests.conftest import fixture_module


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_grad_fn_missing_the_conjugate_says_conjugate(dtype: type) -> None:
    module = fixture_module("complex_output_grad_fn")
    args = [np.asarray(v, dtype=dtype) for v in module.displacement_inputs]
    report = gradcheck.check(module.displacement, *args, compiled=False)
    failed = [c for c in report.checks
              if c.check == Kind.CUSTOM_GRADIENT and c.status == Status.FAIL]
    assert {c.input for c in failed} == {"r", "phi"}
    assert all(c.cause is not None and c.cause.mistake == Mistake.UNCONJUGATED_OUTPUT
               for c in failed)
    assert all("conjugate" in c.message and "tf.math.conj(dz_dx)" in c.message
               for c in failed)
    assert all(c.location is not None and c.location.line == 16 for c in failed)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_conjugated_grad_fn_passes(dtype: type) -> None:
    module = fixture_module("complex_output_grad_fn")
    args = [np.asarray(v, dtype=dtype) for v in module.displacement_fixed_inputs]
    assert gradcheck.check(module.displacement_fixed, *args, compiled=False).ok
