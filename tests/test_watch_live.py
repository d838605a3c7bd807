"""Watch diagnoses the live step wherever the model was built (a Lambda layer, a subclassed
model, a tf.Module, a notebook's cells, a script without a main guard), leaves the training
state bitwise as it was, and replay rebuilds a step only from code the user names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gradcheck

TRAINING = Path(__file__).resolve().parent.parent / "fixtures" / "training"
sys.path.insert(0, str(TRAINING))

import build_read  # noqa: E402
import gan  # noqa: E402
import live_models  # noqa: E402


def _replay(snapshot: Path, *options: str, cwd: str | None = None
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gradcheck", "replay", str(snapshot),
                           "--format", "json", *options], capture_output=True, text=True,
                          cwd=cwd)


def _finding(report: dict[str, object]) -> dict[str, str]:
    [found] = [c for c in report["checks"]  # type: ignore[attr-defined]
               if c["check"] == "non-finite" and c["status"] == "fail"]
    return found  # type: ignore[no-any-return]


def _fit(make: object, directory: Path, **watch_options: object) -> tuple[object, object]:
    model = make()  # type: ignore[operator]
    x, y = live_models.data()
    watch = gradcheck.Watch(directory, log=lambda line: None, **watch_options)
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=[watch])
    return watch, model


@pytest.mark.parametrize(("kind", "make"), [("lambda", live_models.lambda_model),
                                            ("subclassed", live_models.subclassed_model)])
def test_a_model_replay_cannot_rebuild_alone_is_diagnosed_live(kind, make, tmp_path):
    watch, model = _fit(make, tmp_path)
    [snapshot] = watch.snapshots
    assert snapshot.name == "step-000001"
    live = json.loads((snapshot / "report.json").read_text())
    found = _finding(live)
    assert found["location"].endswith(f"live_models.py:{live_models.LOG_LINES[kind]}")
    assert found["message"].startswith("the loss is NaN") and "Log(-13.92)" in found["message"]
    assert all(np.isfinite(w).all() for w in model.get_weights())  # type: ignore[attr-defined]
    refused = _replay(snapshot)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"{snapshot}/report.txt" in refused.stderr
    assert ("Lambda layer" in refused.stderr and "--trust" in refused.stderr if kind == "lambda"
            else "--model MODULE:FUNCTION" in refused.stderr and "get_config" in refused.stderr)
    given = (["--trust"] if kind == "lambda" else ["--model", "live_models:subclassed_model"])
    done = _replay(snapshot, *given, "--path", str(TRAINING))
    assert done.returncode == 1, done.stderr
    assert _finding(json.loads(done.stdout))["message"] == found["message"]


@pytest.mark.parametrize("traced", [False, True])
def test_a_tf_module_custom_loop_is_diagnosed_and_replayed_with_its_code(traced, tmp_path):
    import keras
    import tensorflow as tf

    model, optimizer = live_models.Linear(), keras.optimizers.SGD(0.01)
    watch = gradcheck.Watch(tmp_path, log=lambda line: None)

    def step(x, y):  # type: ignore[no-untyped-def]
        with tf.GradientTape() as tape:
            loss = live_models.module_loss(model, x, y)
        return watch.step(model, optimizer, tape, loss, (x, y),
                          loss_fn=live_models.module_loss)

    run = tf.function(step) if traced else step
    x, y = live_models.data()
    for i in range(4):
        run(x[16 * i:16 * i + 16], y[16 * i:16 * i + 16])
        if watch.stopped:
            break
    [snapshot] = watch.snapshots
    assert sorted(p.name for p in snapshot.iterdir()) == [
        "batch.npz", "report.json", "report.txt", "snapshot.json", "weights.npz"]
    found = _finding(json.loads((snapshot / "report.json").read_text()))
    assert found["location"].endswith(f"live_models.py:{live_models.LOG_LINES['module']}")
    assert np.isfinite(model.w.numpy()).all()
    refused = _replay(snapshot)
    assert refused.returncode == 2 and "--loss live_models:module_loss" in refused.stderr
    done = _replay(snapshot, "--model", "live_models:Linear", "--loss",
                   "live_models:module_loss", "--path", str(TRAINING))
    assert done.returncode == 1, done.stderr
    assert _finding(json.loads(done.stdout))["message"] == found["message"]


def _state(model: object) -> list[np.ndarray]:
    import keras
    import tensorflow as tf

    from gradcheck.training.step_state import model_variables

    optimizer = model.optimizer  # type: ignore[attr-defined]
    return ([v.numpy() for v in model_variables(model)]
            + [np.asarray(v) for v in optimizer.variables]
            + [tf.random.uniform((3,)).numpy(), np.random.random(3),
               keras.random.uniform((3,), seed=None).numpy() if hasattr(keras, "random")
               else np.zeros(3)])


def test_the_diagnosis_leaves_weights_optimizer_metrics_and_rngs_bitwise_as_they_were(tmp_path):
    """stop=False: the run goes on after the diagnosed step exactly as it goes on after the
    same step skipped undiagnosed (dropout draws, Adam's moments, the metrics' totals)."""
    import keras

    def run(diagnose: bool) -> list[np.ndarray]:
        keras.utils.set_random_seed(0)
        ones = {"kernel_initializer": "ones", "bias_initializer": "ones"}
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, **ones),
                                  keras.layers.Dropout(0.3), keras.layers.Dense(1, **ones),
                                  keras.layers.Lambda(live_models.positive_log)])
        model.compile(optimizer="adam", loss="mse", metrics=["mae"])
        x, y = live_models.data()
        x[20] = -50.0
        watch = gradcheck.Watch(tmp_path / str(diagnose), stop=False, diagnose=diagnose,
                                log=lambda line: None)
        model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0, callbacks=[watch])
        assert [p.name for p in watch.snapshots] == ["step-000001", "step-000005"]
        assert (watch.snapshots[0] / "report.json").exists() == diagnose
        return _state(model)

    for diagnosed, skipped in zip(run(True), run(False)):
        np.testing.assert_array_equal(diagnosed, skipped)


def test_a_notebook_trains_and_is_diagnosed_at_its_cell(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    cells = [
        "import numpy as np, tensorflow as tf, keras, gradcheck",
        "def nll(y_true, y_pred):\n    variance = y_pred[:, 1:]\n"
        "    return tf.reduce_mean(tf.math.log(variance) + (y_true - y_pred[:, :1])**2"
        " / variance)",
        "keras.utils.set_random_seed(0)\n"
        "x = np.abs(np.random.default_rng(0).normal(size=(64, 3))).astype('float32')\n"
        "x[20] = -5.0\ny = np.zeros((64, 1), 'float32')\n"
        "model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2,"
        " kernel_initializer='ones', bias_initializer='ones')])\n"
        "model.compile(optimizer='sgd', loss=nll)\nwatch = gradcheck.Watch('snaps')\n"
        "model.fit(x, y, batch_size=16, epochs=1, shuffle=False, callbacks=[watch])",
        "print(watch.snapshots)",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "".join(o.get("text", "") for cell in notebook.cells for o in cell.get("outputs", []))
    assert "gradcheck.Watch: snapshot snaps/step-000001: FAIL non-finite at Cell In[2], line 3" \
        in text, text
    assert "Log(" in text and "\n\ngradcheck.Watch" not in text
    refused = _replay(tmp_path / "snaps" / "step-000001", "--trust", cwd=str(tmp_path))
    assert refused.returncode == 2 and "__main__" in refused.stderr, refused.stderr


def _processes_with(marker: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in command:
                found.append(command)
    return found


def test_a_script_without_a_main_guard_is_diagnosed_once_and_never_rerun(tmp_path):
    script = tmp_path / "train_me.py"
    script.write_text((TRAINING / "unguarded_script.py").read_text())
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("gradcheck.Watch: snapshot") == 1
    assert "FAIL non-finite at train_me.py:12" in done.stderr, done.stderr
    assert sorted(p.name for p in (tmp_path / "snapshots").iterdir()) == ["step-000002"]
    assert _processes_with(str(script)) == []
    refused = _replay(tmp_path / "snapshots" / "step-000002", "--trust", cwd=str(tmp_path))
    assert refused.returncode == 2 and "__main__" in refused.stderr, refused.stderr
    assert "pass --loss MODULE:euclidean" in refused.stderr  # the loss, copied into a module
    assert sorted(p.name for p in (tmp_path / "snapshots").iterdir()) == ["step-000002"]
    assert _processes_with(str(script)) == []


def test_a_gans_two_optimizers_are_both_gated_and_its_step_loss_diagnosed(tmp_path):
    for fixed in (False, True):
        model = gan.make(fixed)
        watch = gradcheck.Watch(tmp_path / str(fixed), loss_fn=gan.step_loss,
                                log=lambda line: None)
        model.fit(gan.images(), batch_size=16, epochs=1, shuffle=False, verbose=0,
                  callbacks=[watch])
        steps = (int(model.d_optimizer.iterations), int(model.g_optimizer.iterations))
        if fixed:
            assert watch.snapshots == [] and steps == (4, 4)
            continue
        assert [p.name for p in watch.snapshots] == ["step-000001"] and steps == (1, 1)
        assert all(np.isfinite(w.numpy()).all() for w in model.trainable_weights)
        found = _finding(json.loads((watch.snapshots[0] / "report.json").read_text()))
        assert found["location"].endswith(f"gan.py:{gan.LOG_LINE}") and "Log(0)" in found[
            "message"]


def test_no_gradient_for_any_weight_is_a_trigger_not_kerass_error(tmp_path):
    """"No gradients provided for any variable" (the loss goes through tf.argmax): a snapshot
    with the cut located, in fit and in a custom loop."""
    import keras
    import tensorflow as tf

    def argmax_loss(y_true, y_pred):
        return tf.reduce_mean(tf.cast(tf.argmax(y_pred, -1), tf.float32) - y_true)

    x, y = live_models.data()
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss=argmax_loss)
    watch = gradcheck.Watch(tmp_path / "fit", log=lambda line: None)
    model.fit(x, y[:, 0], batch_size=16, epochs=1, verbose=0, callbacks=[watch])
    [snapshot] = watch.snapshots
    assert snapshot.name == "step-000000"
    report = json.loads((snapshot / "report.json").read_text())
    assert any(c["check"] == "graph-break" and "ArgMax" in c["message"]
               for c in report["checks"]), report["checks"]
    loop = gradcheck.Watch(tmp_path / "loop", log=lambda line: None)
    optimizer = keras.optimizers.SGD(0.1)

    def loss_fn(model, x, y):  # type: ignore[no-untyped-def]
        return argmax_loss(y, model(x))

    with tf.GradientTape() as tape:
        loss = loss_fn(model, x[:16], y[:16, 0])
    assert loop.step(model, optimizer, tape, loss, (x[:16], y[:16, 0]), loss_fn=loss_fn) is False
    assert [p.name for p in loop.snapshots] == ["step-000000"]


def test_watch_is_a_callback_of_the_keras_that_trains(tmp_path):
    import keras
    import tf_keras

    watch = gradcheck.Watch(tmp_path, log=lambda line: None)
    assert isinstance(watch, keras.callbacks.Callback) and isinstance(watch, gradcheck.Watch)
    model = live_models.lambda_model("tf_keras", fixed=True)
    x, y = live_models.data()
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[watch])
    assert isinstance(watch, tf_keras.callbacks.Callback) and watch.model is model
    assert watch.snapshots == [] and not (tmp_path / "gradcheck-snapshots").exists()


def test_a_weight_read_once_in_build_is_named_at_that_line(tmp_path):
    for fixed in (False, True):
        model = build_read.make(fixed)
        watch = gradcheck.Watch(tmp_path / str(fixed), log=lambda line: None)
        model.fit(*build_read.data(), batch_size=16, epochs=1, verbose=0, callbacks=[watch])
        if fixed:
            assert watch.snapshots == []
            continue
        [snapshot] = watch.snapshots
        report = json.loads((snapshot / "report.json").read_text())
        [found] = [c for c in report["checks"] if c["status"] == "fail"]
        assert found["check"] == "connected" and found["input"].endswith("table")
        assert found["location"].endswith(f"build_read.py:{build_read.READ_LINE}")
        assert "read once, outside the training step" in found["message"]


def test_a_nan_in_one_of_several_inputs_is_the_data_in_watch_and_replay(tmp_path):
    import keras

    keras.utils.set_random_seed(0)
    a, b = keras.Input((2,), name="a"), keras.Input((1,), name="b")
    model = keras.Model({"a": a, "b": b}, keras.layers.Dense(1)(keras.layers.Concatenate()([a, b])))
    model.compile(optimizer="sgd", loss="mse")
    rng = np.random.default_rng(0)
    xa, xb = rng.random((32, 2)).astype("float32"), rng.random((32, 1)).astype("float32")
    xb[19, 0] = np.nan  # step 1, row 3 of its batch
    lines: list[str] = []
    watch = gradcheck.Watch(tmp_path, log=lines.append)
    model.fit({"a": xa, "b": xb}, rng.random((32, 1)).astype("float32"), batch_size=16,
              epochs=1, shuffle=False, verbose=0, callbacks=[watch])
    [snapshot] = watch.snapshots
    words = "the batch's x/b is not finite in 1 element(s) (first nan at [3, 0])"
    assert any(words in line for line in lines), lines
    replayed = _replay(snapshot)
    assert replayed.returncode == 2 and words in replayed.stderr, replayed.stderr
