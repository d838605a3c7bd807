"""gradcheck.Watch on real public reports of broken training (fixtures/training/reports/, each
case citing its source): every case is caught at the step where it breaks, before its update,
and diagnosed at the user's line with its cause; the fix its thread accepted trains with no
trigger. Where today's diagnosis misses the cause, the test is a strict xfail saying what
gradcheck says and what it should say."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gradcheck
from gradcheck.training.snapshot import read_snapshot

REPORTS = Path(__file__).resolve().parent.parent / "fixtures" / "training" / "reports"
sys.path.insert(0, str(REPORTS))

import fit_reports  # noqa: E402
import gan_report  # noqa: E402
import loop_reports  # noqa: E402
import loss_scale_report  # noqa: E402


def line_of(module: Any, text: str, after: str | None = None) -> str:
    """`file.py:LINE` of the first line of a fixture module holding `text` (after the line
    holding `after`)."""
    path = Path(module.__file__)
    lines = path.read_text().splitlines()
    start = 0 if after is None else next(n for n, line in enumerate(lines) if after in line)
    number = next(n for n in range(start, len(lines)) if text in lines[n]) + 1
    return f"{path.name}:{number}"


@dataclass
class Case:
    """One report: how to run it (failing or fixed) into a Watch, and what to expect."""
    run: Callable[[gradcheck.Watch, bool], Any]  # returns the trained model
    step: int  # the training step that breaks
    trigger: str  # the snapshot's trigger kind
    check: str  # the check of the report's first failing finding
    location: str | None  # file.py:LINE of the user's line
    words: tuple[str, ...]  # what the message must name: the op, its value
    cause: tuple[str, ...]  # ... and the cause, or the fix the thread accepted


def _fit(make: Callable[[bool], tuple[Any, Any, Any, int]]) -> Callable[..., Any]:
    def run(watch: gradcheck.Watch, fixed: bool) -> Any:
        model, x, y, batch_size = make(fixed)
        model.fit(x, y, batch_size=batch_size, epochs=1, shuffle=False, verbose=0,
                  callbacks=[watch])
        return model
    return run


def _gan(watch: gradcheck.Watch, fixed: bool) -> Any:
    model = gan_report.make_gan(fixed)
    model.fit(gan_report.data(), batch_size=16, epochs=1, shuffle=False, verbose=0,
              callbacks=[watch])
    return model


def _loss_scale(watch: gradcheck.Watch, fixed: bool) -> Any:
    model = loss_scale_report.make_model(fixed)
    x, y = loss_scale_report.data()
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=[watch])
    return model


def _loop(train: Callable[..., Any], **options: Any) -> Callable[..., Any]:
    return lambda watch, fixed: train(watch, fixed=fixed, **options)


F, L = fit_reports, loop_reports
CASES: dict[str, Case] = {
    # blog.csdn.net/qq_39640572/article/details/105567386 (tensorflow#35257's op)
    "lambda-divide-by-norm": Case(
        _fit(F.lambda_norm), 2, "non-finite-loss", "non-finite",
        line_of(F, "lambda x: tf.math.divide(x, tf.norm("),
        ("RealDiv(0, 0)", "lambda"), ("divide_no_nan",)),
    # keras-team/keras#5733
    "swapped-loss-arguments": Case(
        _fit(F.swapped_arguments), 0, "non-finite-loss", "non-finite",
        line_of(F, "tf.matmul(tf.math.log(y_pred)", after="def policy_loss("),
        ("Log(0)",), ("y_true",)),
    # SO 48951109
    "hand-written-binary-crossentropy": Case(
        _fit(F.hand_written_binary_crossentropy), 1, "non-finite-loss", "non-finite",
        line_of(F, "t_loss = (-1) * (y_true * tf.math.log(y_pred)"),
        ("Log(0)",), ("from_logits",)),
    # SO 'Keras shows NaN loss when using custom softplus activation function'
    "log-1-plus-exp": Case(
        _fit(F.custom_softplus), 2, "non-finite-loss", "non-finite",
        line_of(F, "return tf.math.log(tf.exp(tf.cast(z, tf.float32)) + 1)"),
        ("Exp(137.1)",), ("softplus",)),
    # keras-team/keras#3040
    "learning-rate-too-high-fit": Case(
        _fit(F.linear_regression), 73, "non-finite-loss", "non-finite", None,
        ("Square",), ("learning rate",)),
    # SO 'Keras BinaryCrossentropy loss gives NaN for angular distance', tf-keras, two inputs
    "acos-at-cosine-1-tf-keras": Case(
        _fit(F.angular_distance), 1, "non-finite-gradient", "non-finite",
        line_of(F, "arccos = tf.math.acos(cosine_similarity)"), ("Acos",), ("clip",)),
    # keras-team/keras#16663
    "no-gradient-argsort-fit": Case(
        _fit(F.rank_loss), 0, "no-gradient", "graph-break",
        line_of(F, "predicted_orders = tf.argsort(tf.argsort(y_pred))"),
        ("TopKV2",), ("argsort",)),
    # tensorflow/tensorflow#12030, a tf.Module in a custom loop, eager and in a tf.function
    "learning-rate-too-high-tf-module": Case(
        _loop(L.train_linear), 13, "non-finite-loss", "non-finite",
        line_of(L, "return tf.reduce_sum(tf.square(model(x) - y))"),
        ("Square",), ("learning rate",)),
    "learning-rate-too-high-tf-module-traced": Case(
        _loop(L.train_linear, traced=True), 13, "non-finite-loss", "non-finite",
        line_of(L, "return tf.reduce_sum(tf.square(model(x) - y))"),
        ("Square",), ("learning rate",)),
    # tensorflow/tensorflow#50111
    "no-gradient-numpy-loop": Case(
        _loop(L.train_numpy_loss), 0, "no-gradient", "graph-break",
        line_of(L, "pred = model(x, training=True).numpy()"), (".numpy()",), ()),
    # tensorflow/models#181, the step in a tf.function
    "log-of-softmax-loop": Case(
        _loop(L.train_manual_cross_entropy), 2, "non-finite-loss", "non-finite",
        line_of(L, "tf.math.log(y_prob)"), ("Log(0)",), ("softmax_cross_entropy_with_logits",)),
    # tensorflow/tensorflow#42889, a subclassed model without **kwargs
    "sqrt-of-zero-norm-subclassed": Case(
        _loop(L.train_relative_error), 0, "non-finite-gradient", "non-finite",
        line_of(L, "return tf.norm(pred - y) / tf.norm(y)"), ("Sqrt(0)", "SqrtGrad"), ()),
    # SO 45506455, a GAN's custom train_step with two optimizers
    "gan-log-of-unbounded-discriminator": Case(
        _gan, 2, "non-finite-loss", "non-finite",
        line_of(gan_report, "d_loss = -tf.reduce_mean(tf.math.log(d_real)"),
        ("Log(-",), ("sigmoid",)),
    # tensorflow/tensorflow#38357, keras-team/keras#16100: tf-keras mixed precision
    "tf-keras-loss-scale-stuck-at-1": Case(
        # step 14 halves the scale to 1; step 15 is the first to overflow at scale 1
        _loss_scale, 15, "loss-scale", "non-finite",
        line_of(loss_scale_report, "* 1e8"), ("float16",), ("65504",)),
}

# What gradcheck says today where it misses the step or the cause (strict: fix one, drop it).
NOT_CAUGHT: dict[str, str] = {}
MISSED_CAUSE: dict[str, str] = {}


def _params(reasons: dict[str, str]) -> list[Any]:
    return [pytest.param(name, id=name, marks=pytest.mark.xfail(strict=True, reason=reasons[name]))
            if name in reasons else pytest.param(name, id=name) for name in CASES]


@dataclass
class Run:
    watch: gradcheck.Watch
    model: Any
    lines: list[str]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, bool], Run]:
    """Each case trained once, failing and fixed, diagnosed live (shared by the tests)."""
    done: dict[tuple[str, bool], Run] = {}

    def run(name: str, fixed: bool = False) -> Run:
        if (name, fixed) not in done:
            lines: list[str] = []
            directory = tmp_path_factory.mktemp(f"{name}-{'fixed' if fixed else 'failing'}")
            watch = gradcheck.Watch(directory, diagnose=not fixed, log=lines.append)
            done[name, fixed] = Run(watch, CASES[name].run(watch, fixed), lines)
        return done[name, fixed]

    return run


def _weights(model: Any) -> list[np.ndarray]:
    return [np.asarray(v) for v in model.trainable_variables]


def _stored(snapshot: Path) -> set[bytes]:
    """Every array the snapshot holds for the weights before the failing step (weights.npz,
    or model.keras's weights file), as bytes."""
    if (snapshot / "weights.npz").exists():
        with np.load(snapshot / "weights.npz", allow_pickle=False) as stored:
            return {np.ascontiguousarray(stored[k]).tobytes() for k in stored.files}
    import io
    import zipfile

    import h5py

    arrays: set[bytes] = set()

    def keep(_: str, item: Any) -> None:
        if isinstance(item, h5py.Dataset):
            arrays.add(np.ascontiguousarray(item[()]).tobytes())

    with zipfile.ZipFile(snapshot / "model.keras") as archive:
        data = archive.read("model.weights.h5")
    with h5py.File(io.BytesIO(data), "r") as weights:
        weights.visititems(keep)
    return arrays


def _report(run: Run) -> dict[str, Any]:
    [snapshot] = run.watch.snapshots
    return json.loads((snapshot / "report.json").read_text())


@pytest.mark.parametrize("name", _params(NOT_CAUGHT))
def test_each_report_is_caught_at_its_step_before_the_update(name, runs):
    case, done = CASES[name], runs(name)
    assert [p.name for p in done.watch.snapshots] == [f"step-{case.step:06d}"], done.lines
    assert read_snapshot(done.watch.snapshots[0]).trigger.kind == case.trigger
    assert all(np.isfinite(w).all() for w in _weights(done.model))
    assert done.watch.stopped or done.model.stop_training
    # the update was not applied: the weights are those the snapshot kept from before the step
    stored = _stored(done.watch.snapshots[0])
    assert all(np.ascontiguousarray(w).tobytes() in stored for w in _weights(done.model))


@pytest.mark.parametrize("name", _params(MISSED_CAUSE))
def test_each_report_is_diagnosed_at_the_users_line_with_its_cause(name, runs):
    case, done = CASES[name], runs(name)
    report = _report(done)
    failing = [c for c in report.get("checks", []) if c["status"] == "fail"]
    assert failing, (report, done.lines)
    finding = failing[0]
    assert finding["check"] == case.check, finding
    if case.location is not None:
        assert (finding["location"] or "").endswith(case.location), finding
    for words in case.words + case.cause:
        assert words in finding["message"], (words, finding["message"])


@pytest.mark.parametrize("name", list(CASES))
def test_the_accepted_fix_trains_with_no_trigger(name, runs):
    done = runs(name, fixed=True)
    assert done.watch.snapshots == [] and not done.watch.stopped, done.lines
    assert all(np.isfinite(w).all() for w in _weights(done.model))
