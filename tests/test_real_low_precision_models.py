"""Real users' models near kinks in training mode and low precision: correct ones pass (kink
warnings allowed), real bugs next to the same kinks still fail at their grad_fn's line."""

from __future__ import annotations

from pathlib import Path

import gradcheck
from tests.conftest import fixture_module

FIXTURE = "real_low_precision_models"


def _line(module: object, text: str) -> str:
    """`file.py:N` of the fixture line holding this text."""
    path = Path(str(getattr(module, "__file__", "")))
    number = next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)
    return f"{path.name}:{number}"


def _failed(report: gradcheck.Report) -> list[tuple[str, str | None, str]]:
    return [(c.check, c.input, c.message) for c in report.checks if c.failed]


def test_mnist_convnet_with_batchnorm_in_training_passes_in_full_mode() -> None:
    """A step crossing several ReLU/max-pool kinks at once: Richardson's extrapolation of the
    crossed quotients lay just outside the range autodiff spans across the step."""
    module = fixture_module(FIXTURE)
    report = gradcheck.check(module.convnet_loss, module.digits, wrt="variables", mode="full")
    assert report.ok, _failed(report)
    kink = next(c for c in report.checks
                if c.check == "kink" and c.input.endswith("features/kernel"))
    # Too shallow to show at the point, the kink is found where the element's steps cross it.
    assert str(kink.location).endswith(_line(module, "logits = convnet(x"))
    assert "Relu (inside mnist_convnet" in kink.message


def test_mnist_convnet_with_batchnorm_passes_in_fast_mode() -> None:
    module = fixture_module(FIXTURE)
    report = gradcheck.check(module.convnet_loss, module.digits, wrt="variables", mode="fast")
    assert report.ok, _failed(report)
    assert any(c.check == "fast" and c.status == "pass" for c in report.checks)


def test_half_slope_relu_in_a_batchnorm_model_fails_at_its_grad_fn() -> None:
    """Checked with wrt="variables", the custom_gradient site itself once passed (judged alone
    with no sources at all) while every weight's projection failed with no line."""
    module = fixture_module(FIXTURE)
    report = gradcheck.check(module.half_slope_loss, module.tabular, wrt="variables",
                             mode="fast")
    site = next(c for c in report.checks if c.check == "custom-gradient")
    grad_fn = _line(module, "return upstream * tf.cast(x > 0, x.dtype) * 0.5")
    assert site.failed and str(site.location).endswith(grad_fn)
    fast = [c for c in report.checks if c.check == "fast" and c.failed]
    assert fast and all(str(c.location).endswith(grad_fn) for c in fast)


def test_grad_fn_ignoring_its_upstream_in_a_bfloat16_model_fails_at_its_line() -> None:
    module = fixture_module(FIXTURE)
    report = gradcheck.check(module.upstream_ignored_loss, module.tabular, wrt="variables",
                             mode="fast")
    site = next(c for c in report.checks if c.check == "custom-gradient")
    assert site.failed and str(site.location).endswith(
        _line(module, "return tf.cast(x > 0, x.dtype)"))
    assert not report.ok


def test_conv1d_batchnorm_relu_from_a_lightning_issue_passes() -> None:
    """awaelchli/pytorch-lightning-snippets issue 3: Conv1d + BatchNorm1d + ReLU, batch 4."""
    module = fixture_module(FIXTURE)
    report = gradcheck.check(module.conv1d_loss, module.signals, wrt="variables", mode="full")
    assert report.ok, _failed(report)
