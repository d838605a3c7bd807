"""gradcheck.Watch names the source of a non-finite step, not only the op that broke, and tries
the fix on the snapshot: real reports (fixtures/training/reports/source_reports.py and
cause_reports.py, each citing its source) where the op is not the bug: an unscaled feature, a
-inf fill or mask, a focal loss's alpha, Adam's epsilon in float16, a float16 cast of an
unnormalised column. Each is caught at its step, its source named (line, feature, sample,
hyperparameter, optimizer setting), the fix tried where it can be and said to repair the step;
the corrected version trains with no trigger."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import gradcheck

REPORTS = Path(__file__).resolve().parent.parent / "fixtures" / "training" / "reports"
sys.path.insert(0, str(REPORTS))

import cause_reports  # noqa: E402
import fit_reports  # noqa: E402
import source_reports  # noqa: E402


def _line(module: Any, text: str, occurrence: int = 0) -> str:
    path = Path(module.__file__)
    numbers = [n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    return f"{path.name}:{numbers[occurrence]}"


def _fit(make: Callable[..., Any]) -> Callable[[gradcheck.Watch, bool], None]:
    def run(watch: gradcheck.Watch, fixed: bool) -> None:
        model, x, y, batch_size = make(fixed=fixed)
        model.fit(x, y, batch_size=batch_size, epochs=1, shuffle=False, verbose=0,
                  callbacks=[watch])
    return run


def _loop(train: Callable[..., Any]) -> Callable[[gradcheck.Watch, bool], None]:
    return lambda watch, fixed: train(watch, fixed=fixed)


@dataclass
class Case:
    run: Callable[[gradcheck.Watch, bool], None]
    step: int
    # the source's line (or the op's, when the source has none); one of several
    location: str | tuple[str, ...] | None
    source: tuple[str, ...]  # what the chain must name
    repaired_by: str | None  # the trial that made the step finite (None: none could be tried)


S, C = source_reports, cause_reports
CASES = {
    "vae-unscaled-features": Case(
        _fit(S.tabular_vae), 0, _line(S, "tf.exp(z_log_var)"),
        ("2 of 6 features of x are unscaled: feature 2 of x ranges 2.04e+04 .. 8.85e+04",),
        "features of x standardised"),
    # Stack Overflow's "NaN loss output when training DNN with Keras": every column raw
    "raw-features-every-column": Case(
        _fit(S.raw_sensor_features), 0, _line(S, "return -tf.reduce_mean(y_true * tf.math.log"),
        ("every feature of x is unscaled", "and the others reach ±"),
        "features of x standardised"),
    "focal-alpha-2": Case(
        _fit(S.focal), 10, _line(S, "neg = -(1 - alpha)"),
        ("unbounded below", "alpha=2"), None),
    "attention-inf-fill": Case(
        _fit(S.masked_attention), 1, _line(S, "scores = tf.where(padded"),
        ("-inf fill", "sample 3 of the batch"), "the fill -1e9"),
    "mask-argument-inf": Case(
        _loop(S.masked_logits_loop), 0, None,
        ("argument mask, a mask holding -inf",), "mask's infinities replaced"),
    "float16-adam-epsilon": Case(
        _fit(S.float16_adam), 1, None,
        ("previous update: Adam", "epsilon 1e-07 is below float16's resolution"),
        "epsilon=0.0001"),
    "mixed-float16-unscaled-column": Case(
        _fit(S.mixed_precision_unscaled), 0, None,
        ("feature 3 of x", "past float16's largest value 65504"), "features of x standardised"),
    # rwth-i6/returnn#576, collected for this issue
    "returnn-fully-masked-row": Case(
        _fit(C.CASES["fully-masked-attention-row"]["run"]), 2, None,
        ("-inf fill", "sample 3 of the batch"), "the fill -1e9"),
    # keras-team/keras#13221: stacked relu LSTMs; the second one's state overflows, inside
    # Keras' loop: located at the line that built that layer, its activation the source
    "relu-lstm-state-overflow": Case(
        _fit(C.CASES["relu-lstm-recurrent"]["run"]), 1,
        # which of the two relu LSTMs overflows first depends on the thread count's rounding
        tuple(_line(C, "keras.layers.LSTM(32, activation=activation", occurrence=k)
              for k in (0, 1)),
        ("recurrent layer lstm", "activation='relu'"), "with tanh as lstm"),
    # CyberZHG/keras-radam#43: a warm-up schedule whose 'decay' rises 100 times
    "warmup-schedule-spike": Case(
        _fit(C.CASES["warmup-min-lr-above-lr"]["run"]), 6, None,
        ("schedule RAdamWarmup: its rate jumps from 1e-05 at step 2",), None),
    # fizyr/keras-retinanet#706: gamma=0.5 makes the focal weight's power infinite at 0
    "retinanet-focal-gamma-half": Case(
        _fit(C.CASES["focal-gamma-half"]["run"]), 2, None,
        ("exponent 0.5 (gamma=0.5) is below 1",), "the base clipped"),
    # allenai/allennlp#890: an additive mask built as log(mask); a sample fully masked
    "allennlp-log-of-mask": Case(
        _fit(C.CASES["masked-log-softmax-empty-row"]["run"]), 1, None,
        ("a 0/1 mask: log(mask)", "sample 5 of the batch"), "log(mask)'s -inf made -1e9"),
    # keras-team/keras#5733: a policy loss written loss(y_pred, y_true)
    "keras-5733-swapped-arguments": Case(
        _fit(fit_reports.swapped_arguments), 0, None, ("has its arguments swapped",),
        "the loss called with its arguments swapped"),
    # tensorflow/tensorflow#11756 in a two-input functional model with a Lambda
    "lambda-inf-mask-multiply": Case(
        _fit(C.CASES["infinity-mask-multiply"]["run"]), 2, None, ("-inf",), "-1e9"),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, bool], Any]:
    done: dict[tuple[str, bool], tuple[gradcheck.Watch, list[str]]] = {}

    def run(name: str, fixed: bool = False) -> tuple[gradcheck.Watch, list[str]]:
        if (name, fixed) not in done:
            lines: list[str] = []
            watch = gradcheck.Watch(tmp_path_factory.mktemp(name), diagnose=not fixed,
                                    log=lines.append)
            CASES[name].run(watch, fixed)
            done[name, fixed] = watch, lines
        return done[name, fixed]
    return run


@pytest.mark.parametrize("name", list(CASES))
def test_the_source_is_named_and_the_fix_tried_on_the_snapshot(name, runs):
    case = CASES[name]
    watch, lines = runs(name)
    assert [p.name for p in watch.snapshots] == [f"step-{case.step:06d}"], lines
    report = json.loads((watch.snapshots[0] / "report.json").read_text())
    finding = next(c for c in report["checks"] if c["status"] == "fail")
    assert finding["check"] == "non-finite", finding
    if case.location is not None:
        assert (finding["location"] or "").endswith(case.location), finding
    message = finding["message"]
    for words in case.source:
        assert words in message, (words, message)
    if case.repaired_by is None:
        assert "no fix could be tried on the snapshot" in message, message
    else:
        tried = message[message.index("tried on the snapshot:"):]
        assert case.repaired_by in tried and "is finite" in tried, tried


@pytest.mark.parametrize("name", list(CASES))
def test_the_corrected_version_trains_with_no_trigger(name, runs):
    watch, lines = runs(name, fixed=True)
    assert watch.snapshots == [] and not watch.stopped, lines


def test_layers_whose_outputs_never_reach_the_loss_are_named_where_they_are_called(tmp_path):
    """tensorflow/tensorflow#36880: linear1..3 each called on x, only linear4's result used.
    Each unused layer is a failing `connected` finding at the line that calls it, not at a line
    inside Keras."""
    case = C.CASES["dropped-layer-outputs"]
    lines: list[str] = []
    watch = gradcheck.Watch(tmp_path, log=lines.append)
    _fit(case["run"])(watch, False)
    report = json.loads((watch.snapshots[0] / "report.json").read_text())
    dropped = [c for c in report["checks"] if c["check"] == "connected"
               and c["status"] == "fail"]
    for call in ("x1 = self.linear1(x)", "x2 = self.linear2(x)", "x3 = self.linear3(x)"):
        found = [c for c in dropped if (c["location"] or "").endswith(_line(C, call))]
        assert found and all("never reaches the loss" in c["message"] for c in found), dropped
        assert all(c["input"].endswith("/kernel") or c["input"].endswith("/bias")
                   for c in found), found
    assert all("site-packages" not in (c["location"] or "") for c in report["checks"])


@pytest.mark.parametrize("scale", [50.0, 1.0])
def test_a_diverged_run_overflowing_in_a_matmul_names_the_learning_rate(tmp_path, scale):
    """SGD at 0.5: the weights reach 1e10..1e22 and a MatMul (no elementwise arguments to
    show) overflows, forward or backward. The source is the optimizer, not the op: the fix
    names the learning rate, and normalising the inputs only when they are far from unit
    scale (saying how far)."""
    lines: list[str] = []
    watch = gradcheck.Watch(tmp_path, log=lines.append)
    _fit(lambda fixed: S.sgd_divergence(fixed, scale))(watch, False)
    report = json.loads((watch.snapshots[0] / "report.json").read_text())
    failing = [c["message"] for c in report["checks"] if c["status"] == "fail"]
    assert failing and all("driven there by the updates before this step" in m
                           and "lower the learning rate (SGD, learning_rate=0.5)" in m
                           for m in failing), failing
    if scale > 1:
        assert "MatMul" in failing[0] and "whose value is inf from finite inputs" in failing[0]
        assert "or normalise the inputs (they reach ±" in failing[0], failing[0]
    else:  # a backward MatMul's inf is an overflow too, not an infinite local derivative
        assert any("the gradient of MatMul (inside" in m and "which overflows: from finite"
                   " values it gives" in m for m in failing), failing
        assert not any("normalise" in m for m in failing), failing


def test_a_constant_feature_standardised_to_nan_is_named_as_such(tmp_path):
    """mllam/neural-lam#136: a tf.data pipeline standardises every feature, one of which is
    constant: 0/0 in every sample. The data is at fault, and the report says which feature and
    why, not only 'clean the input pipeline'."""
    lines: list[str] = []
    watch = gradcheck.Watch(tmp_path, log=lines.append)
    _fit(C.CASES["standardise-constant-field-tf-data"]["run"])(watch, False)
    report = json.loads((watch.snapshots[0] / "report.json").read_text())
    assert "NaN in every sample of feature(s) 3" in report["error"], report
    assert "zero standard deviation" in report["error"], report


def test_a_forward_pass_outside_the_tape_is_named_at_the_step(tmp_path):
    """A tf.Module of tf-keras layers called before the tape opens: every weight gets None.
    The diagnosis (loss_fn under a tape) sees the loss depend on each: the step's tape never
    recorded the forward pass, said at the user's watch.step line; fixed, it trains."""
    lines: list[str] = []
    watch = gradcheck.Watch(tmp_path / "failing", log=lines.append)
    S.forward_outside_tape_loop(watch)
    report = json.loads((watch.snapshots[0] / "report.json").read_text())
    failing = [c for c in report["checks"] if c["status"] == "fail"]
    assert {c["input"] for c in failing} == {"dense/kernel", "dense/bias", "dense_1/kernel",
                                             "dense_1/bias"} or len(failing) == 4, failing
    assert all(c["check"] == "connected" and "did not record the forward pass" in c["message"]
               for c in failing), failing
    assert failing[0]["location"].endswith(_line(S, "if not watch.step(model, optimizer, tape,"
                                                    " loss, (x, y), loss_fn=squared_error)"))
    fixed = gradcheck.Watch(tmp_path / "fixed", diagnose=False)
    S.forward_outside_tape_loop(fixed, fixed=True)
    assert fixed.snapshots == []


def test_a_regression_loss_gets_advice_for_a_regression_output(tmp_path):
    """A hand-written MSLE on a linear output: the advice is an output activation that keeps
    y_pred in the log's domain (or Keras' clipping MSLE), not log_sigmoid or from_logits."""
    watch = gradcheck.Watch(tmp_path, log=lambda _: None)
    _fit(S.msle_regression)(watch, False)
    report = json.loads((watch.snapshots[0] / "report.json").read_text())
    finding = next(c for c in report["checks"] if c["status"] == "fail")
    assert finding["location"].endswith(_line(S, "return tf.reduce_mean(tf.square(tf.math.log("
                                                  "y_pred + 1.0)"))
    assert "regression output" in finding["message"], finding
    assert "from_logits" not in finding["message"] and "log_sigmoid" not in finding["message"]
