"""TensorFlow's own gradient at fault, where what goes wrong is not a value: tf.nn.silu's
custom gradient returning the wrong shape for a tensor beta, named as TensorFlow's at the
user's call with the workaround; and a gradient None only under tf.function (a loop over a
tf.data.Dataset inside f), said the right way round, at the loop's line
(fixtures/tensorflow_gradient_shapes.py, fixtures/dataset_loop.py)."""

from __future__ import annotations

import pytest

import gradcheck
from gradcheck.evidence.causes import TensorFlowGradientOp, WrongGradientReason
from gradcheck.evidence.connected import GradShape
from gradcheck.kinds.compiled.evidence import NoneOnly
from gradcheck.report import Kind, Mistake, Relation, Report, Status
from tests.conftest import fixture_module

SHAPES = "tensorflow_gradient_shapes"


def _check(module: str, name: str, **options: object) -> Report:
    found = fixture_module(module)
    return gradcheck.check(getattr(found, name), *getattr(found, f"{name}_inputs"), **options)


@pytest.mark.parametrize(("name", "wrong", "line"), [
    ("silu_beta", {"beta": ((), (2,))}, 16),
    ("silu_broadcast_features", {"features": ((2, 2), (2,)), "beta": ((), (2, 2))}, 25)])
def test_silu_s_own_gradient_of_the_wrong_shape_is_tensorflow_s_at_the_call(
        name: str, wrong: dict[str, tuple[tuple[int, ...], tuple[int, ...]]], line: int
        ) -> None:
    report = _check(SHAPES, name, compiled=False)
    shapes = [c for c in report.checks if c.check == Kind.GRAD_SHAPE]
    assert {c.input for c in shapes} == set(wrong)
    for result in shapes:
        assert result.status == Status.FAIL
        assert isinstance(result.evidence, GradShape)
        assert (result.evidence.gradient_shape, result.evidence.input_shape) == wrong[
            result.input]
        assert result.location is not None and result.location.line == line
        assert result.attributed_to is not None
        assert result.attributed_to.relation == Relation.TENSORFLOW_GRADIENT
        cause = result.cause
        assert cause is not None and cause.mistake == Mistake.TENSORFLOW_GRADIENT
        assert isinstance(cause.facts, TensorFlowGradientOp)
        assert cause.facts.reason == WrongGradientReason.BROADCAST_CUSTOM_GRADIENT
        said = result.message
        assert "TensorFlow's own gradient of tf.nn.silu (tf.nn.swish) has the wrong shape" in said
        assert "tensorflow/tensorflow#127690" in said
        assert "features * tf.math.sigmoid(beta * features)" in said
        assert "a tf.custom_gradient grad_fn must return" not in said  # not the user's grad_fn
    assert not [c for c in report.checks if c.failed and c.location is None]


@pytest.mark.parametrize("name", ["silu_written_out", "silu_scalar_beta"])
def test_silu_written_out_or_with_a_scalar_beta_passes(name: str) -> None:
    report = _check(SHAPES, name)
    assert report.ok and all(c.status == Status.PASS for c in report.checks)


def test_a_gradient_none_only_under_tf_function_names_the_mode_and_the_loop() -> None:
    report = _check("dataset_loop", "fun")
    assert not report.ok
    [failed] = [c for c in report.checks if c.failed]
    assert failed.check == Kind.COMPILED and failed.input == "x"
    evidence = failed.evidence
    assert isinstance(evidence, NoneOnly)
    assert not evidence.eagerly and evidence.mode == "tf.function"
    assert evidence.cut == "ReduceDataset" and evidence.dataset
    assert failed.location is not None and failed.location.line == 19
    assert failed.location.path.endswith("dataset_loop.py")
    said = failed.message
    assert "is None under tf.function, but not eagerly" in said
    assert "None only eagerly" not in said
    assert "tensorflow/tensorflow#38453" in said
    # Eagerly the gradient is right: d(x·2·3)/dx = 6.
    assert {c.check: c.status for c in report.checks if c.check in (
        Kind.JACOBIAN, Kind.VJP)} == {Kind.JACOBIAN: Status.PASS, Kind.VJP: Status.PASS}


def test_the_same_loop_over_a_tensor_passes_in_both_modes() -> None:
    report = _check("dataset_loop", "over_tensor")
    assert report.ok
    assert [c.status for c in report.checks if c.check == Kind.COMPILED] == [Status.PASS] * 2
