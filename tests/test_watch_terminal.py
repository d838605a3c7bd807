"""gradcheck.Watch beside Keras' own output: its first message starts its own line after fit's
progress bar in a real terminal, and its TensorBoard summaries (`tensorboard=` alone) carry the
names Keras' TensorBoard callback gives the same weights, so the two line up."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

import gradcheck
from tests.terminal import in_terminal

pytestmark = pytest.mark.slow  # real training runs
ROOT = Path(__file__).resolve().parent.parent
TRAINING = ROOT / "fixtures" / "training"
sys.path.insert(0, str(TRAINING))

import euclidean_loss  # noqa: E402

FIT = """
import sys
sys.path.insert(0, {training!r})
import euclidean_loss
import gradcheck

model = euclidean_loss.make_model()
x, y = euclidean_loss.data()  # step 2's batch makes a NaN gradient
model.fit(x, y, batch_size=16, epochs=2, shuffle=False, callbacks=[gradcheck.Watch({path!r})])
"""


def test_watchs_messages_start_their_own_line_after_fits_progress_bar(tmp_path: Path) -> None:
    script = FIT.format(training=str(TRAINING), path=str(tmp_path / "snapshots"))
    shown = in_terminal([sys.executable, "-c", script], 100, cwd=ROOT)
    assert shown.returncode == 0, shown.text
    said = [line for line in shown.lines if "gradcheck.Watch:" in line]
    assert any(line.startswith("gradcheck.Watch: step 2 (epoch 1, batch 3)") for line in said)
    assert said and all(line.startswith("gradcheck.Watch:") for line in said), shown.text
    assert any("loss:" in line for line in shown.lines)  # Keras' bar was drawn


def _tags(logdir: Path) -> set[str]:
    import tensorflow as tf

    return {value.tag for events in logdir.glob("events.out.tfevents.*")
            for event in tf.compat.v1.train.summary_iterator(str(events))
            for value in event.summary.value}


@pytest.mark.parametrize("package", ["keras", "tf_keras"])
def test_tensorboard_alone_records_health_beside_kerass_tags(package: str,
                                                             tmp_path: Path) -> None:
    keras = importlib.import_module(package)
    logs = tmp_path / "logs"
    watch = gradcheck.Watch(tmp_path / "snapshots", tensorboard=str(logs), log_freq=1,
                            log=lambda line: None)
    assert watch.health
    model = euclidean_loss.make_model(package, loss=euclidean_loss.correct_loss)
    x, y = euclidean_loss.data(None)
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0,
              callbacks=[keras.callbacks.TensorBoard(str(logs), histogram_freq=1), watch])
    assert all(np.isfinite(w).all() for w in model.get_weights())
    keras_weights = {tag.removesuffix("/histogram") for tag in _tags(logs / "train")
                     if tag.endswith("/histogram")}
    ours = _tags(logs / "gradcheck")
    assert keras_weights, _tags(logs / "train")
    for weight in keras_weights:
        assert {f"{weight}/gradient", f"{weight}/gradient_norm",
                f"{weight}/gradient_zero_fraction"} <= ours, (weight, ours)
