"""An output layer computing in float16 (the Keras mixed-precision guide's pitfall): the
precision finding names the layer, its policy and dtype='float32' when switching that layer
alone to float32 fixes the value and the gradients; a model whose fault lies elsewhere (a
hidden layer, a loss too small for float16) and a model with a float32 head get no such
words."""

from __future__ import annotations

import pytest

import gradcheck
from gradcheck.report import CheckResult, Report

from .conftest import fixture_module

PITFALL = "the known pitfall: the output layer"


@pytest.fixture(scope="module")
def heads():  # type: ignore[no-untyped-def]
    return fixture_module("float16_head")


@pytest.fixture(scope="module")
def mixed():  # type: ignore[no-untyped-def]
    return fixture_module("mixed_precision")


def _precision(report: Report) -> list[CheckResult]:
    return [c for c in report.checks if c.check == "precision"]


def _check(function, inputs, wrt: str = "variables") -> Report:  # type: ignore[no-untyped-def]
    return gradcheck.check(function, *inputs, wrt=wrt, compiled=False,
                           kinds=frozenset({"precision", "non-finite"}))


def test_a_float16_tanh_head_under_binary_crossentropy_is_named(heads) -> None:  # type: ignore[no-untyped-def]
    [found] = _precision(_check(heads.xor_loss, heads.xor_loss_inputs))
    assert found.status == "fail"
    # Keras numbers an unnamed layer by the layers made before it in the process.
    dense = heads.tanh_head.layers[-1].name
    assert (f"the output layer {dense} (Dense) of xor computes in float16 (dtype=float16);"
            " give it dtype='float32' (Keras mixed-precision guide" in found.message)
    assert found.evidence.head.layer == dense  # type: ignore[union-attr]


def test_a_float16_sigmoid_head_whose_dice_loss_overflows_is_named(heads) -> None:  # type: ignore[no-untyped-def]
    [found] = _precision(_check(heads.segmentation_loss, heads.segmentation_loss_inputs))
    assert found.status == "fail"
    assert ("the output layer mask (Conv2D) of segmenter computes in float16 under the"
            " mixed_float16 policy; give it dtype='float32'" in found.message)


def test_a_hand_written_softmax_head_is_named_at_the_overflowing_line(mixed) -> None:  # type: ignore[no-untyped-def]
    # With the arguments too: the input's gradient still passes through a float16 Dense.
    found = _precision(_check(mixed.cross_entropy, mixed.cross_entropy_inputs, wrt="all"))
    assert len(found) == 4 and all(c.status == "fail" for c in found)
    assert all(PITFALL in c.message for c in found)
    assert str(found[0].location).endswith("mixed_precision.py:17")
    softmax = mixed.hot.layers[-1].name
    assert (f"the output layer {softmax} (HandSoftmax) of hot computes in float16 under the"
            " mixed_float16 policy; give it dtype='float32'" in found[0].message)


@pytest.mark.parametrize("loss", ["normed_loss", "tiny_loss"])
def test_a_fault_that_a_float32_head_does_not_fix_is_not_blamed_on_it(mixed, loss) -> None:  # type: ignore[no-untyped-def]
    inputs = mixed.normed_inputs if loss == "normed_loss" else mixed.tiny_loss_inputs
    found = _precision(_check(getattr(mixed, loss), inputs, wrt="all"))
    assert any(c.failed for c in found)
    assert not any(PITFALL in c.message for c in found)


@pytest.mark.parametrize("loss", ["fixed_loss", "fixed_segmentation_loss"])
def test_a_float32_head_gets_no_pitfall(heads, loss) -> None:  # type: ignore[no-untyped-def]
    report = _check(getattr(heads, loss), getattr(heads, f"{loss}_inputs"))
    assert not any(c.failed for c in _precision(report))
    assert not any(PITFALL in c.message for c in report.checks)


@pytest.mark.parametrize(("loss", "head"), [
    # qubvel/segmentation_models#536: Unet's final Activation('softmax') under mixed_float16.
    ("unet_loss", "the output layer softmax (Activation) of unet computes in float16 under"),
    # tensorflow/models#6309: resnet50's softmax Dense fc1000 under mixed_float16.
    ("imagenet_loss", "the output layer fc1000 (Dense) of resnet50 computes in float16 under"),
])
def test_a_library_models_float16_softmax_head_is_named(heads, loss, head) -> None:  # type: ignore[no-untyped-def]
    [found] = _precision(_check(getattr(heads, loss), getattr(heads, f"{loss}_inputs")))
    assert found.status == "fail"
    said = " ".join(found.message.split())
    assert head in said and "the mixed_float16 policy; give it dtype='float32'" in said
