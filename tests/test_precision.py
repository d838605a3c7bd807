"""The precision check on real Keras models under mixed precision: a correct model passes, a
loss too small for float16 underflows (and a loss scale fixes it), a float16 softmax overflows
at its line."""

from __future__ import annotations

import pytest

import gradcheck
from gradcheck.kinds.precision.judging import judge_precision

from .conftest import fixture_module


@pytest.fixture(scope="module")
def mixed():  # type: ignore[no-untyped-def]
    return fixture_module("mixed_precision")


def _precision(report):  # type: ignore[no-untyped-def]
    return [c for c in report.checks if c.check == "precision"]


def test_a_correct_mixed_float16_model_passes(mixed) -> None:  # type: ignore[no-untyped-def]
    found = _precision(gradcheck.check(mixed.loss, *mixed.loss_inputs, wrt="variables"))
    assert len(found) == 4 and all(c.status == "pass" for c in found)


def test_a_loss_too_small_for_float16_underflows_and_names_the_loss_scale(mixed) -> None:  # type: ignore[no-untyped-def]
    report = gradcheck.check(mixed.tiny_loss, *mixed.tiny_loss_inputs, wrt="variables")
    found = _precision(report)
    assert [c.status for c in found] == ["fail"] * 4 and report.exit_code == 1
    assert "underflows" in found[0].message and "a loss scale of" in found[0].message
    assert "bfloat16 (mixed_bfloat16) would keep it" in found[0].message
    scaled = gradcheck.check(mixed.tiny_loss, *mixed.tiny_loss_inputs, wrt="variables",
                             loss_scale=65536, compiled=False)
    assert all(c.status == "pass" for c in _precision(scaled))


def test_a_float16_softmax_overflow_is_named_at_its_line(mixed) -> None:  # type: ignore[no-untyped-def]
    report = gradcheck.check(mixed.cross_entropy, *mixed.cross_entropy_inputs, wrt="variables",
                             compiled=False)
    found = _precision(report)
    assert found and all(c.status == "fail" for c in found)
    assert str(found[0].location).endswith("mixed_precision.py:17")
    assert "overflows where float32's is finite" in found[0].message
    assert "dtype='float32'" in found[0].message


def test_loss_scale_is_validated_as_the_command_line_validates_it(mixed) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="loss_scale must be a positive number or auto"):
        gradcheck.check(mixed.loss, *mixed.loss_inputs, loss_scale=-1)


def test_rounding_noise_of_a_gradient_zero_by_construction_is_no_failure() -> None:
    import numpy as np

    reference = np.array([3.8e-8, -2.0e-8])  # an attention key's bias: zero up to rounding
    low = np.array([2.7e-4, 0.0])
    assert judge_precision("float16", low, reference, peak=1.8).ok
    assert not judge_precision("float16", np.zeros(2), np.array([1e-6, 2e-6]), peak=2e-6).ok


def test_a_hand_written_layer_norm_whose_float16_variance_overflows_fails(mixed) -> None:  # type: ignore[no-untyped-def]
    report = gradcheck.check(mixed.normed_loss, *mixed.normed_inputs, wrt="variables",
                             compiled=False)
    [found] = [c for c in _precision(report) if c.input is None]
    assert found.status == "fail" and "overflows or underflows in float16" in found.message


def test_a_deep_stack_whose_float16_gradients_are_subnormal_is_a_warning(mixed) -> None:  # type: ignore[no-untyped-def]
    report = gradcheck.check(mixed.deep_loss, *mixed.deep_inputs, wrt="variables",
                             compiled=False, kinds=frozenset({"precision"}))
    found = _precision(report)
    assert found and not any(c.failed for c in found)
    warned = [c for c in found if c.status == "warn"]
    assert warned and "would underflow to 0" in warned[0].message
