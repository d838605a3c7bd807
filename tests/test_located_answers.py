"""Answers users asked for, at their lines (issue 56): TensorFlow's complex gradient is the
conjugate; a forward-mode NaN is TensorFlow's rule at the op's line; a tf.where's tie is the
jump's line; a weight behind an integer cast, a custom gradient made by a factory on every call,
perturb-then-apply's two custom gradients declared as surrogates and a cut before a wrong custom
gradient are each located."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

import gradcheck
from gradcheck.evidence.notes import WhileLoopJacobian
from gradcheck.report import CheckResult, Kind, Mistake, Report, Status
from tests.conftest import fixture_module, fixture_target


def _check(fixture: str, name: str, **options: object) -> Report:
    module = fixture_module(fixture)
    target = getattr(module, name)
    return gradcheck.check(target, *getattr(module, f"{name}_inputs"), **options)


def _found(report: Report, kind: Kind, status: Status, source: str | None = None
           ) -> list[CheckResult]:
    return [c for c in report.checks if c.check == kind and c.status == status
            and (source is None or c.input == source)]


def test_a_holomorphic_gradient_is_said_to_be_the_conjugate() -> None:
    report = _check("question_answers", "square", compiled=False)
    assert report.ok
    [said] = [str(n) for n in report.notes if "conjugate" in str(n)]
    assert "f'(z) = 0+0.2j" in said and "gives 0-0.2j" in said


def test_a_forward_mode_nan_is_named_at_the_op_s_line() -> None:
    report = _check("question_answers", "segment_means", compiled=False)
    assert report.ok
    [jvp] = _found(report, Kind.JVP, Status.WARN)
    assert jvp.location is not None and jvp.location.line == 22
    assert "forward-mode rule of SegmentMean" in jvp.message


def test_a_jump_at_a_tie_is_at_the_comparison_s_line() -> None:
    report = _check("question_answers", "masked", compiled=False)
    [kink] = _found(report, Kind.KINK, Status.WARN)
    assert kink.location is not None and kink.location.line == 32
    assert "Greater" in kink.message and "tie" in kink.message


def test_a_weight_behind_an_integer_cast_is_at_the_cast_when_another_layer_breaks_tracing(
        ) -> None:
    report = _check("layered_float_and_cast", "shifted_scaled")
    [cast] = _found(report, Kind.GRAPH_BREAK, Status.FAIL, "shift/shift")
    assert cast.cause is not None and cast.cause.mistake == Mistake.INTEGER_CAST
    assert cast.location is not None and cast.location.line == 29
    [untrained] = _found(report, Kind.CONNECTED, Status.WARN, "shift/shift")
    assert untrained.location is not None and untrained.location.line == 29
    [temperature] = _found(report, Kind.GRAPH_BREAK, Status.FAIL, "temperature/temperature")
    assert temperature.location is not None and temperature.location.line == 20


@pytest.mark.parametrize(("name", "source"), [
    ("negated", "x"), ("off_by_a_little", "x"), ("dropped", "y")])
def test_a_custom_gradient_made_on_every_call_is_at_its_grad_fn(name: str, source: str
                                                                ) -> None:
    report = _check("factory_custom_gradients", name, compiled=False)
    [wrong] = _found(report, Kind.CUSTOM_GRADIENT, Status.FAIL, source)
    assert wrong.location is not None and wrong.location.line == 30


def test_a_correct_custom_gradient_made_on_every_call_passes() -> None:
    report = _check("factory_custom_gradients", "correct", compiled=False)
    assert report.ok and not _found(report, Kind.CUSTOM_GRADIENT, Status.FAIL)


def test_perturb_then_apply_s_two_custom_gradients_are_surrogates_of_their_own() -> None:
    both = _check("perturb_then_quantise", "quantise", compiled=False,
                  surrogates=("ste_round", "_perturb_and_apply"))
    assert both.ok
    lines = {c.location.line for c in _found(both, Kind.CUSTOM_GRADIENT, Status.WARN)
             if c.location is not None}
    assert lines == {13, 37}
    outer = _check("perturb_then_quantise", "quantise", compiled=False,
                   surrogates=("_perturb_and_apply",))
    [declared] = [c for c in _found(outer, Kind.CUSTOM_GRADIENT, Status.WARN)]
    assert declared.location is not None and declared.location.line == 37


def test_perturb_then_apply_s_failures_are_blamed_on_the_gradient_that_ran() -> None:
    # Only the outer _perturb_and_apply is declared: its grad_fn gives f's gradient, and the
    # inner ste_round's grad_fn never runs in it (forward mode runs it, reverse mode does not).
    report = _check("perturb_then_quantise", "quantise", compiled=False,
                    surrogates=("_perturb_and_apply",))
    assert not _found(report, Kind.JACOBIAN, Status.FAIL)
    assert not _found(report, Kind.VJP, Status.FAIL)
    for kind in (Kind.JACOBIAN, Kind.VJP):
        [excused] = _found(report, kind, Status.WARN)
        assert excused.location is not None and excused.location.line == 37
        assert "_perturb_and_apply" in excused.message and "ste_round" not in excused.message
    # ste_round judged on its own is still a straight-through estimator nobody declared.
    [inner] = _found(report, Kind.CUSTOM_GRADIENT, Status.FAIL)
    assert inner.location is not None and inner.location.line == 13


def test_a_cut_is_searched_for_when_the_wrong_custom_gradient_is_past_it() -> None:
    # softplus's grad_fn is wrong, but it never runs in f's gradient: the .numpy() round
    # trip before it is why x's gradient is wrong, and where the jacobian finding points.
    report = _check("cut_before_custom_gradient", "loss", compiled=False)
    [wrong] = _found(report, Kind.CUSTOM_GRADIENT, Status.FAIL)
    assert wrong.location is not None and wrong.location.line == 19
    [cut] = _found(report, Kind.GRAPH_BREAK, Status.FAIL, "x")
    assert cut.location is not None and cut.location.line == 25
    for kind in (Kind.JACOBIAN, Kind.VJP):
        [found] = _found(report, kind, Status.FAIL, "x")
        assert found.location is not None and found.location.line == 25
        assert ".numpy()" in found.message and "softplus" not in found.message


def test_a_float16_loss_scaled_beyond_its_range_is_said_to_overflow() -> None:
    report = _check("question_answers", "scaled_half_loss", compiled=False)
    [value] = [c for c in _found(report, Kind.NON_FINITE, Status.FAIL) if c.input is None]
    assert value.location is not None and value.location.line == 43
    assert "overflows" in value.message and "float16's range" in value.message
    assert "65504" in value.message


def test_a_variable_made_in_a_layer_s_call_raises_at_its_line(run_cli: Callable[..., Result]
                                                               ) -> None:
    result = run_cli(["check", fixture_target("variable_in_layer_call", "model"), "--format",
                      "json"])
    assert result.exit_code == 3
    assert "variable_in_layer_call.py:11)" in json.loads(result.stdout)["error"]


def test_xla_s_mixed_precision_failure_is_at_the_layer_s_line() -> None:
    report = _check("mixed_resize_xla", "f")
    [compiled] = [c for c in report.checks if c.check == Kind.COMPILED
                  and c.status == Status.SKIP and c.location is not None]
    assert compiled.location.line == 15  # UpSampling2D(interpolation="bilinear")
    assert "the gradient of ResizeBilinear" in compiled.message


def test_a_small_loaded_lstm_says_that_its_own_tape_jacobian_needs_no_pfor(tmp_path: Path
                                                                           ) -> None:
    # tensorflow#57343 at 6 output elements: gradcheck takes the rows itself, and tries pfor once.
    module = fixture_module("pfor_fallback")
    module.save_lstm(str(tmp_path / "lstm"))
    report = gradcheck.check(module.lstm_predictor(str(tmp_path / "lstm")),
                             module.lstm_inputs[0][:2], wrt="inputs", compiled=False,
                             kinds=frozenset({"jacobian"}))
    assert report.ok
    [note] = [n for n in report.notes if isinstance(n, WhileLoopJacobian)]
    assert note.op == "StatelessWhile" and "experimental_use_pfor=False" in str(note)


def test_model_predict_on_the_taped_path_is_named_at_its_line() -> None:
    report = _check("keras_predict_in_tape", "saliency", wrt="inputs")
    [cut] = _found(report, Kind.GRAPH_BREAK, Status.FAIL, "x")
    assert cut.cause is not None and cut.cause.mistake == Mistake.KERAS_PREDICT
    assert str(cut.location).endswith("keras_predict_in_tape.py:13")
    assert "call the model itself, model(x)" in cut.message
    # Forward mode cannot run through predict's own tf.data pipeline: at the same line.
    [forward] = _found(report, Kind.JVP, Status.SKIP, "x")
    assert str(forward.location).endswith("keras_predict_in_tape.py:13")
    assert _check("keras_predict_in_tape", "fixed", wrt="inputs").ok
