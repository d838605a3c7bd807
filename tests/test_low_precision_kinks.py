"""Kinks that finite-difference steps cross where precision is low, and harmless stop_gradients:
no false alarm, and a stop_gradient blamed only where it blocks a dependence."""

from __future__ import annotations

import gradcheck
from tests.conftest import fixture_module

FIXTURE = "low_precision_kinks"


def test_batchnorm_relu_float32_model_in_training_passes_with_a_kink_warning() -> None:
    module = fixture_module(FIXTURE)
    report = gradcheck.check(module.training_loss, module.features, wrt="variables")
    failed = [(c.check, c.input, c.message) for c in report.checks if c.failed]
    assert report.ok, failed
    kinks = [c for c in report.checks if c.check == "kink"]
    assert any(c.input.endswith("hidden/kernel") for c in kinks)
    # A weight's point is where training is: the kink is harmless, not a point to move.
    assert all("harmless for training" in c.message and "move the point" not in c.message
               for c in kinks)
    assert not any(c.check == "graph-break" for c in report.checks)


def test_only_the_stop_gradient_that_blocks_a_dependence_is_blamed() -> None:
    module = fixture_module(FIXTURE)
    report = gradcheck.check(module.standardised_cut, *module.standardised_cut_inputs())
    breaks = [c for c in report.checks if c.check == "graph-break"]
    assert [str(c.location).rsplit(":", 1)[1] for c in breaks] == ["31"]
    jacobian = next(c for c in report.checks if c.check == "jacobian")
    assert jacobian.failed and str(jacobian.location).endswith("low_precision_kinks.py:31")


def test_mixed_bfloat16_gradient_within_its_precision_passes_vjp() -> None:
    module = fixture_module(FIXTURE)
    report = gradcheck.check(module.bfloat16_loss, module.images, wrt="variables")
    assert report.ok, [(c.check, c.input, c.message) for c in report.checks if c.failed]
    assert any(c.check == "vjp" and c.status == "pass" for c in report.checks)


def test_float16_relu_layer_under_a_scaled_loss_has_no_false_alarm() -> None:
    """keras-team/keras#19479: the float16 step crosses other samples' ReLU kinks, so autodiff
    along it is a line with a step in it, not a curve; a kernel element was a 2x false alarm."""
    module = fixture_module(FIXTURE)
    report = gradcheck.check(module.scaled_float16_loss, module.scaled, module.scaled_x,
                             module.scaled_y)
    assert report.ok, [(c.check, c.input, c.message) for c in report.checks if c.failed]
    assert any(c.check == "kink" and c.input.endswith("kernel") for c in report.checks)
