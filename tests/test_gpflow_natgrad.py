"""docs/vjp.md's GPflow example, run with GPflow (the test extra): the numbers the page gives
for uᵀJ and the symmetric-convention warnings it says to expect for eta2."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

import gradcheck
from tests.conftest import fixture_module

UPSTREAM = {"m": [[0.5], [0.25]], "L": [[[1.0, 0.0], [2.0, -1.0]]]}


def test_gpflow_s_conversions_give_the_page_s_numbers_and_warnings() -> None:
    natgrad = fixture_module("gpflow_natgrad")
    eta1, eta2 = (tf.constant(v) for v in natgrad.to_meanvarsqrt_inputs())
    with tf.GradientTape() as tape:
        tape.watch([eta1, eta2])
        y = natgrad.to_meanvarsqrt(eta1, eta2)
    grads = tape.gradient([y["m"], y["L"]], [eta1, eta2],
                          output_gradients=[tf.constant(UPSTREAM["m"], tf.float64),
                                            tf.constant(UPSTREAM["L"], tf.float64)])
    np.testing.assert_allclose(grads[0], [[2.125], [-1.5]], atol=1e-12)
    np.testing.assert_allclose(grads[1], [[[-0.125, 0.75], [0.75, -0.5]]], atol=1e-12)

    report = gradcheck.check(natgrad.to_meanvarsqrt, eta1.numpy(), eta2.numpy(),
                             upstream=UPSTREAM, kinds={"vjp", "jacobian"})
    assert report.ok, str(report)
    warned = {(c.check, c.input) for c in report.checks if c.status == "warn"}
    assert warned == {("vjp", "eta2"), ("jacobian", "eta2")}, str(report)
    assert all("symmetric part" in c.message for c in report.checks if c.status == "warn")
