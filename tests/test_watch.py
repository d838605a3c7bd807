"""gradcheck.Watch on real training runs (Keras 3 and tf-keras fit, XLA, steps_per_execution,
a custom loop) and `gradcheck replay` on what it wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gradcheck
from gradcheck.training.snapshot import Trigger, flatten_batch, read_snapshot, unflatten_batch

TRAINING = Path(__file__).resolve().parent.parent / "fixtures" / "training"
sys.path.insert(0, str(TRAINING))

import euclidean_loss  # noqa: E402
import gaussian_nll  # noqa: E402
import nested_batch  # noqa: E402

SQRT_LINE, LOG_LINE = 11, 19
FAILING_ROW = 37  # row 5 of the batch of step 2


def _fit(package: str = "keras", watch: object = None, loss: object = None, **options: object
         ) -> object:
    model = euclidean_loss.make_model(package, loss=loss or euclidean_loss.euclidean_loss,
                                      **options)
    x, y = euclidean_loss.data(None if loss is not None else FAILING_ROW)
    model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0,
              callbacks=[watch] if watch is not None else [])
    return model


@pytest.fixture(scope="module")
def caught(tmp_path_factory: pytest.TempPathFactory) -> tuple[gradcheck.Watch, object]:
    """One Keras 3 fit run whose step 2 has a NaN gradient, diagnosed."""
    lines: list[str] = []
    watch = gradcheck.Watch(tmp_path_factory.mktemp("snapshots"), log=lines.append)
    model = _fit(watch=watch)
    watch.lines = lines  # type: ignore[attr-defined]
    return watch, model


def test_fit_is_stopped_before_the_nan_update_with_a_diagnosed_snapshot(caught):
    watch, model = caught
    [snapshot] = watch.snapshots
    assert snapshot.name == "step-000002"
    assert not (snapshot / "weights.npz").exists()  # the weights are stored once, in the model
    import keras

    saved = keras.models.load_model(snapshot / "model.keras", custom_objects={
        "euclidean_loss": euclidean_loss.euclidean_loss})
    [kernel] = model.get_weights()
    assert np.isfinite(kernel).all()
    np.testing.assert_array_equal(kernel, saved.get_weights()[0])
    batch = np.load(snapshot / "batch.npz", allow_pickle=False)
    assert batch["x"].shape == (16, 3) and not batch["x"][FAILING_ROW - 32].any()
    manifest = read_snapshot(snapshot)
    assert (manifest.step, manifest.epoch, manifest.batch) == (2, 1, 3)  # as Keras counts
    assert "/" not in json.dumps(manifest.as_json()["modules"])  # no path of this machine
    assert manifest.trigger.kind == "non-finite-gradient"
    report = json.loads((snapshot / "report.json").read_text())
    [finding] = [c for c in report["checks"] if c["check"] == "non-finite"]
    assert finding["status"] == "fail"
    assert finding["location"].endswith(f"euclidean_loss.py:{SQRT_LINE}")
    assert "Sqrt" in finding["message"] and "fix:" in finding["message"]
    assert "Sqrt" in (snapshot / "report.txt").read_text()
    assert any("snapshot" in line and f"euclidean_loss.py:{SQRT_LINE}" in line
               for line in watch.lines)


def test_replay_repeats_the_diagnosis_only_with_the_code_the_user_names(caught):
    snapshot = caught[0].snapshots[0]
    replay = [sys.executable, "-m", "gradcheck", "replay", str(snapshot), "--format", "json"]
    refused = subprocess.run(replay, capture_output=True, text=True, cwd="/")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "euclidean_loss" in refused.stderr and "--trust" in refused.stderr
    assert f"{snapshot}/report.txt" in refused.stderr  # the diagnosis made in training
    done = subprocess.run(replay + ["--trust", "--path", str(TRAINING)], capture_output=True,
                          text=True)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    live = json.loads((snapshot / "report.json").read_text())
    assert [(c["check"], c["status"], c["location"], c["message"]) for c in report["checks"]] \
        == [(c["check"], c["status"], c["location"], c["message"]) for c in live["checks"]]
    assert any(c["check"] == "non-finite" and c["status"] == "fail"
               and c["location"].endswith(f"euclidean_loss.py:{SQRT_LINE}")
               for c in report["checks"])


def test_replay_refuses_an_altered_partial_or_missing_snapshot(caught, tmp_path):
    import shutil

    altered = tmp_path / "altered"
    shutil.copytree(caught[0].snapshots[0], altered)
    with open(altered / "batch.npz", "ab") as stream:
        stream.write(b"\0")
    partial = tmp_path / "partial"
    shutil.copytree(caught[0].snapshots[0], partial)
    (partial / "model.keras").unlink()
    for path, words in ((altered, "was altered: batch.npz"), (partial, "partial: model.keras"),
                        (tmp_path / "nowhere", "does not exist")):
        done = subprocess.run([sys.executable, "-m", "gradcheck", "replay", str(path)],
                              capture_output=True, text=True)
        assert done.returncode == 2
        assert done.stderr.strip().count("\n") == 0 and words in done.stderr, done.stderr


@pytest.mark.parametrize(("package", "options"), [
    ("tf_keras", {}),
    ("keras", {"jit_compile": True}),
    ("keras", {"steps_per_execution": 3}),
    ("tf_keras", {"jit_compile": True, "steps_per_execution": 2}),
])
def test_fit_is_caught_at_the_failing_step_in_every_setup(package, options, tmp_path):
    watch = gradcheck.Watch(tmp_path, diagnose=False, log=lambda line: None)
    model = _fit(package, watch, **options)
    assert [p.name for p in watch.snapshots] == ["step-000002"]
    batch = np.load(watch.snapshots[0] / "batch.npz")
    assert not batch["x"][FAILING_ROW - 32].any()
    assert all(np.isfinite(w).all() for w in model.get_weights())
    assert read_snapshot(watch.snapshots[0]).keras == package


@pytest.mark.parametrize(("package", "options"),
                         [("keras", {}), ("tf_keras", {"jit_compile": True})])
def test_watching_a_correct_run_changes_no_weight_bit(package, options, tmp_path):
    plain = _fit(package, loss=euclidean_loss.correct_loss, **options)
    watch = gradcheck.Watch(tmp_path, diagnose=False, log=lambda line: None)
    watched = _fit(package, watch, loss=euclidean_loss.correct_loss, **options)
    assert watch.snapshots == []
    for a, b in zip(plain.get_weights(), watched.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_later_fits_reuse_the_watched_step_and_are_caught_at_their_step(tmp_path):
    watch = gradcheck.Watch(tmp_path, diagnose=False, log=lambda line: None)
    model = euclidean_loss.make_model(loss=euclidean_loss.euclidean_loss)
    x, y = euclidean_loss.data(None)
    model.fit(x[:32], y[:32], batch_size=16, shuffle=False, verbose=0, callbacks=[watch])
    unwatched, watched = model.train_function, watch._watched._watched_function
    assert watched is not unwatched and watch.snapshots == []
    x[16 + 5], y[16 + 5] = 0.0, 0.0  # the second fit's second batch: step 3 in all
    model.fit(x[:32], y[:32], batch_size=16, shuffle=False, verbose=0, callbacks=[watch])
    assert watch._watched._watched_function is watched  # not traced again
    assert model.train_function is unwatched
    assert [p.name for p in watch.snapshots] == ["step-000003"]
    assert not np.load(watch.snapshots[0] / "batch.npz")["x"][5].any()


def test_a_custom_loop_is_caught_at_the_log_of_a_negative_variance(tmp_path):
    watch = gradcheck.Watch(tmp_path, log=lambda line: None)
    model = gaussian_nll.train(watch)
    [snapshot] = watch.snapshots
    assert snapshot.name == "step-000003" and watch.stopped
    assert all(np.isfinite(w).all() for w in model.get_weights())
    report = json.loads((snapshot / "report.json").read_text())
    [finding] = [c for c in report["checks"] if c["check"] == "non-finite"]
    assert finding["location"].endswith(f"gaussian_nll.py:{LOG_LINE}")
    assert "Log" in finding["message"]


def test_stop_false_goes_on_and_keep_bounds_the_snapshots(tmp_path):
    lines: list[str] = []
    watch = gradcheck.Watch(tmp_path, stop=False, keep=1, diagnose=False, log=lines.append)
    model = euclidean_loss.make_model()
    x, y = euclidean_loss.data()  # step 2 fails, and step 6 (the same batch, epoch 2)
    x[53], y[53] = 0.0, 0.0  # step 3 fails too, right after step 2: counted, not kept
    model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0, callbacks=[watch])
    assert [p.name for p in watch.snapshots] == ["step-000006"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000006"]
    assert sum("fired at 1 more step(s) in a row" in line for line in lines) == 2
    assert all(np.isfinite(w).all() for w in model.get_weights())


def test_a_nan_made_inside_an_rnns_loop_is_traced_to_the_cells_op(tmp_path):
    """The traced graph shows the NaN first at the loop's TensorListStack; the op that made it
    is the cell's Exp, which f runs eagerly step by step."""
    import real_cases

    model, x, y = real_cases.exponential_rnn()
    watch = gradcheck.Watch(tmp_path, log=lambda line: None)
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=[watch])
    [snapshot] = watch.snapshots
    assert snapshot.name == "step-000000"
    report = json.loads((snapshot / "report.json").read_text())
    [output] = [c for c in report["checks"] if c["check"] == "non-finite" and not c["input"]]
    assert "the first op that turns finite values into non-finite ones is Exp (inside" \
           in output["message"] and "simple_rnn_cell)" in output["message"]
    assert "TensorListStack" not in output["message"]


def test_a_directory_that_cannot_hold_snapshots_is_an_error_before_training(tmp_path):
    file = tmp_path / "file"
    file.write_text("")
    with pytest.raises(ValueError, match="is not a directory"):
        gradcheck.Watch(file)
    with pytest.raises(ValueError, match="keep must be a positive number"):
        gradcheck.Watch(tmp_path, keep=0)


def test_a_snapshot_that_cannot_be_written_warns_and_leaves_nothing_partial(tmp_path):
    lines: list[str] = []
    watch = gradcheck.Watch(tmp_path, diagnose=False, log=lines.append)
    watch.model = euclidean_loss.make_model()
    batch = (np.zeros((2, 3), object), None)  # an array snapshots cannot hold
    watch._caught(Trigger("non-finite-loss", "the loss is not finite"), 0, 0,
                  batch, None, "xy")
    assert watch.snapshots == [] and list(tmp_path.iterdir()) == []
    assert any("warning: could not write the snapshot" in line for line in lines)


@pytest.mark.parametrize(("case", "step", "words"), [
    ("saturating_softmax", 1, ("non-finite", "real_cases.py:10", "Log(0)")),
    ("rounded_weight", 0, ("graph-break", "real_cases.py:45", "Round")),
])
def test_real_fit_reports_are_caught_and_explained_at_the_users_line(case, step, words, tmp_path):
    import real_cases

    model, x, y = getattr(real_cases, case)()
    watch = gradcheck.Watch(tmp_path, log=lambda line: None)
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=[watch])
    [snapshot] = watch.snapshots
    assert snapshot.name == f"step-{step:06d}"
    report = json.loads((snapshot / "report.json").read_text())
    kind, line, op = words
    [finding] = [c for c in report["checks"] if c["check"] == kind]
    assert finding["location"].endswith(line) and op in finding["message"]


def test_a_batch_holding_inf_is_named_as_the_data_at_fault(tmp_path):
    import real_cases

    lines: list[str] = []
    model, x, y = real_cases.inf_in_data()
    watch = gradcheck.Watch(tmp_path, log=lines.append)
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=[watch])
    assert [p.name for p in watch.snapshots] == ["step-000003"]
    assert any("the batch's x is not finite in 1 element(s) (first inf at [2, 2])" in line
               for line in lines)
    assert all(np.isfinite(w).all() for w in model.get_weights())


def test_health_names_dead_relu_weights_draws_them_and_writes_tensorboard(tmp_path):
    watch = gradcheck.Watch(tmp_path / "snapshots", health=True, log_freq=1,
                            tensorboard=str(tmp_path / "logs"), log=lambda line: None)
    model = euclidean_loss.dead_relu_model()
    x, y = euclidean_loss.data()
    model.fit(np.abs(x), y, batch_size=16, epochs=1, shuffle=False, verbose=0,
              callbacks=[watch])
    [snapshot] = watch.snapshots
    health = np.load(snapshot / "health.npz")
    assert health["norms"].shape == (3, 2) and int(health["failing_step"]) == 2
    np.testing.assert_array_equal(health["zeros"][:2], 0.5)
    report = json.loads((snapshot / "report.json").read_text())
    found = {c["input"]: c for c in report["checks"] if c["check"] == "health"}
    hidden = str(health["names"][0])  # Keras names layers by creation order in the process
    assert found[hidden]["status"] == "warn"
    assert "is dead: 50% of its gradient elements" in found[hidden]["message"]
    assert (snapshot / "health.png").stat().st_size > 0
    tags = _summary_tags(tmp_path / "logs" / "gradcheck")
    kernel = model.trainable_weights[0].path  # as Keras' TensorBoard callback names it
    assert kernel.endswith(hidden)
    assert "gradcheck/diagnosis" in tags and f"{kernel}/gradient_norm" in tags
    assert f"{kernel}/gradient" in tags  # histograms, written by fit's traced step


def _summary_tags(logdir: Path) -> set[str]:
    import tensorflow as tf

    return {value.tag for events in logdir.glob("events.out.tfevents.*")
            for event in tf.compat.v1.train.summary_iterator(str(events))
            for value in event.summary.value}


def test_a_custom_loop_writes_gradient_histograms_at_its_log_freq(tmp_path):
    watch = gradcheck.Watch(tmp_path / "snapshots", health=True, log_freq=2,
                            tensorboard=str(tmp_path / "logs"), log=lambda line: None)
    model = gaussian_nll.train(watch)
    tags = _summary_tags(tmp_path / "logs" / "gradcheck")
    assert {f"{w.path}/gradient" for w in model.trainable_weights} <= tags
    assert "gradcheck/diagnosis" in tags


@pytest.mark.parametrize(("package", "options"), [
    ("keras", {"jit_compile": True}),
    ("tf_keras", {"jit_compile": True, "steps_per_execution": 2}),
])
def test_gradient_histograms_are_written_from_an_xla_compiled_step(package, options, tmp_path):
    """Bucketed in the XLA step every log_freq steps, written outside it: TensorBoard's
    histograms (30 buckets counting every element) at steps 0, 2, 4 and 6 of 8."""
    import tensorflow as tf

    watch = gradcheck.Watch(tmp_path / "snapshots", tensorboard=str(tmp_path / "logs"),
                            log_freq=2, log=lambda line: None)
    model = _fit(package, watch, loss=euclidean_loss.correct_loss, **options)
    [kernel] = model.trainable_weights
    tag = f"{kernel.path if package == 'keras' else kernel.name.replace(':', '_')}/gradient"
    written = {}
    for events in (tmp_path / "logs" / "gradcheck").glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            for value in event.summary.value:
                if value.tag == tag:
                    written[event.step] = tf.make_ndarray(value.tensor)
    assert sorted(written) == [0, 2, 4, 6]
    for buckets in written.values():
        assert buckets.shape == (30, 3) and buckets[:, 2].sum() == 6  # the kernel's elements
        assert (buckets[:, 0] <= buckets[:, 1]).all() and buckets[0, 0] < buckets[-1, 1]


def test_health_judges_growth_and_vanishing_from_the_steps_before_the_failure():
    from gradcheck.kinds.health.judging import judge_health

    norms = np.array([[1.0, 1e-9, 1.0], [1.0, 1e-9, 2.0], [1.0, 1e-9, 5e3], [np.nan] * 3])
    zeros = np.zeros_like(norms)
    states = [state for state, _ in judge_health(norms, zeros)]
    assert states == ["healthy", "vanishing", "exploding"]


def test_fit_under_mirrored_strategy_is_caught_with_the_whole_batch(tmp_path):
    import os

    done = subprocess.run([sys.executable, str(TRAINING / "mirrored_fit.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [str(TRAINING.parent.parent), str(TRAINING)])})
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    # The snapshot holds the shard of the replica that fired (8 of the batch's 16 rows).
    assert seen == {"snapshots": ["step-000002"], "batch_rows": 8, "zero_row_kept": True,
                    "finite": True, "bitwise": True, "correct_snapshots": 0}


@pytest.mark.parametrize("package", ["keras", "tf_keras"])
def test_a_collapsing_loss_scale_is_caught_with_the_last_skipped_batch(package, tmp_path):
    """Regression targets beyond float16's range under mixed_float16 (SO 'loss scale keeps
    falling'): every step overflows, the LossScaleOptimizer skips it and halves its scale,
    down to its floor (tf-keras' stops at 1 and skips every step from then on, silently)."""
    import importlib

    keras = importlib.import_module(package)

    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, "relu"),
                                  keras.layers.Dense(1)])
    finally:
        keras.mixed_precision.set_global_policy("float32")
    model.compile(optimizer="adam", loss="mse")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 4)).astype("float32")
    y = (rng.normal(size=(512, 1)) * 1e5).astype("float32")
    lines: list[str] = []
    watch = gradcheck.Watch(tmp_path, diagnose=False, log=lines.append)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False, callbacks=[watch])
    [snapshot] = watch.snapshots
    manifest = read_snapshot(snapshot)
    if package == "tf_keras":
        # tf-keras compares the targets with the float16 output in float16: 1e5 is inf there,
        # so the loss itself is not finite, which no loss scale repairs: caught at once.
        assert manifest.trigger.kind == "non-finite-loss" and manifest.step == 0
    else:  # Keras 3 compares in float32: the gradient overflows until the scale is below 1
        assert manifest.trigger.kind == "loss-scale", manifest.trigger.message
        assert "overflowed at loss scale 1:" in manifest.trigger.message
        assert snapshot.name == f"step-{manifest.step:06d}" and manifest.step >= 14
    assert np.load(snapshot / "batch.npz")["y"].shape == (16, 1)


def test_a_model_with_named_inputs_keeps_its_dict_batch(tmp_path):
    import keras

    keras.utils.set_random_seed(0)
    a, b = keras.Input((2,), name="a"), keras.Input((1,), name="b")
    out = keras.layers.Dense(2, use_bias=False)(keras.layers.Concatenate()([a, b]))
    model = keras.Model({"a": a, "b": b}, out)
    model.compile(optimizer="sgd", loss=euclidean_loss.euclidean_loss)
    rng = np.random.default_rng(0)
    xa, xb = rng.normal(size=(32, 2)).astype("float32"), rng.normal(size=(32, 1)).astype("float32")
    y = rng.normal(size=(32, 2)).astype("float32")
    xa[20], xb[20], y[20] = 0.0, 0.0, 0.0
    watch = gradcheck.Watch(tmp_path, diagnose=False, log=lambda line: None)
    model.fit({"a": xa, "b": xb}, y, batch_size=16, epochs=1, shuffle=False, verbose=0,
              callbacks=[watch])
    [snapshot] = watch.snapshots
    batch = np.load(snapshot / "batch.npz")
    assert sorted(batch.files) == ["x/a", "x/b", "y"] and not batch["x/a"][4].any()
    done = subprocess.run([sys.executable, "-m", "gradcheck", "replay", str(snapshot), "-q",
                           "--trust", "--path", str(TRAINING)], capture_output=True, text=True)
    assert done.returncode == 1 and "FAILED" in done.stdout, done.stderr


def test_a_custom_loop_traced_in_tf_function_is_caught_and_stopped(tmp_path):
    lines: list[str] = []
    watch = gradcheck.Watch(tmp_path, diagnose=False, log=lines.append)
    model = gaussian_nll.train_traced(watch)
    assert [p.name for p in watch.snapshots] == ["step-000003"] and watch.stopped, lines
    assert all(np.isfinite(w).all() for w in model.get_weights())
    batch = np.load(watch.snapshots[0] / "batch.npz")
    assert batch["arg0"].shape == (8, 2) and (batch["arg0"][5] == -3.0).all()


def test_health_is_recorded_in_a_traced_custom_loop(tmp_path):
    watch = gradcheck.Watch(tmp_path, diagnose=False, health=True, log=lambda line: None)
    gaussian_nll.train_traced(watch)
    [snapshot] = watch.snapshots
    health = np.load(snapshot / "health.npz")
    assert list(health["steps"]) == [0, 1, 2, 3] and int(health["failing_step"]) == 3
    assert list(health["names"]) == list(watch._names) and len(watch._names) == 2
    eager = gradcheck.Watch(tmp_path / "eager", diagnose=False, health=True,
                            log=lambda line: None)
    gaussian_nll.train(eager)
    expected = np.load(eager.snapshots[0] / "health.npz")
    assert (health["norms"] > 0).all()
    np.testing.assert_allclose(health["norms"], expected["norms"], rtol=1e-5)
    np.testing.assert_array_equal(health["zeros"], expected["zeros"])


def test_watch_step_inside_an_xla_compiled_step_is_a_clear_error(tmp_path):
    watch = gradcheck.Watch(tmp_path, diagnose=False, log=lambda line: None)
    with pytest.raises(ValueError, match="cannot run inside an XLA-compiled step"):
        gaussian_nll.train_traced(watch, jit_compile=True)


@pytest.mark.parametrize("traced", [False, True])
def test_a_tf_keras_custom_loop_is_caught_eager_and_traced(traced, tmp_path):
    import tensorflow as tf
    import tf_keras

    tf_keras.utils.set_random_seed(0)
    model = tf_keras.Sequential([tf_keras.Input((2,)), tf_keras.layers.Dense(
        2, kernel_initializer=tf_keras.initializers.Constant([[0.1, 0.5], [0.2, 0.5]]),
        bias_initializer=tf_keras.initializers.Constant([0.0, 1.0]))])
    optimizer = tf_keras.optimizers.SGD(1e-3)
    lines: list[str] = []
    watch = gradcheck.Watch(tmp_path, diagnose=False, log=lines.append)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = gaussian_nll.nll(model, x, y)
        return watch.step(model, optimizer, tape, loss, (x, y), loss_fn=gaussian_nll.nll)

    run = tf.function(step) if traced else step
    for x, y in gaussian_nll.batches():
        run(x, y)
        if watch.stopped:
            break
    assert [p.name for p in watch.snapshots] == ["step-000003"], lines
    assert read_snapshot(watch.snapshots[0]).keras == "tf_keras"
    assert all(np.isfinite(w).all() for w in model.get_weights())


@pytest.mark.parametrize("traced", [False, True])
def test_watching_a_correct_custom_loop_changes_no_weight_bit(traced, tmp_path):
    import keras
    import tensorflow as tf

    def train(watch):  # type: ignore[no-untyped-def]
        model = gaussian_nll.make_model()
        optimizer = keras.optimizers.Adam(1e-2)

        def step(x, y):
            with tf.GradientTape() as tape:
                loss = gaussian_nll.nll(model, x, y)
            if watch is None:
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return True
            return watch.step(model, optimizer, tape, loss, (x, y), loss_fn=gaussian_nll.nll)

        run = tf.function(step) if traced else step
        for index, (x, y) in enumerate(gaussian_nll.batches()):
            if index < 3:  # the batches before the one that makes the variance negative
                run(x, y)
        return model

    watch = gradcheck.Watch(tmp_path, diagnose=False, log=lambda line: None)
    plain, watched = train(None), train(watch)
    assert watch.snapshots == []
    for a, b in zip(plain.get_weights(), watched.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_a_batch_nested_deeper_than_a_dict_is_kept_and_replayed_as_given(tmp_path):
    watch = gradcheck.Watch(tmp_path, log=lambda line: None)
    nested_batch.train(watch)
    [snapshot] = watch.snapshots
    batch = np.load(snapshot / "batch.npz")
    assert sorted(batch.files) == ["arg0/0/a", "arg0/0/b", "arg0/1", "arg1"]
    assert snapshot.name == "step-000002" and not batch["arg0/0/a"][3].any()
    report = json.loads((snapshot / "report.json").read_text())
    [finding] = [c for c in report["checks"] if c["check"] == "non-finite"]
    assert finding["location"].endswith("nested_batch.py:12") and "Sqrt" in finding["message"]


def test_nested_batches_flatten_and_come_back_in_their_structure():
    a, b, c = np.zeros(2), np.ones((2, 1)), np.arange(3.0)
    batch = [{"outer": {"a": a, "pair": (b, c)}}, [[a], {"b": b}]]
    flat = flatten_batch({"x": batch[0], "y": batch[1]})
    assert sorted(flat) == ["x/outer/a", "x/outer/pair/0", "x/outer/pair/1", "y/0/0", "y/1/b"]
    x, y = unflatten_batch(("x", "y"), flat)
    assert set(x) == {"outer"} and set(x["outer"]) == {"a", "pair"}
    np.testing.assert_array_equal(x["outer"]["a"], a)
    assert isinstance(x["outer"]["pair"], list) and len(x["outer"]["pair"]) == 2
    np.testing.assert_array_equal(x["outer"]["pair"][1], c)
    assert isinstance(y, list) and isinstance(y[0], list) and set(y[1]) == {"b"}
    np.testing.assert_array_equal(y[1]["b"], b)


@pytest.mark.parametrize("package", ["keras", "tf_keras"])
def test_a_cosine_loss_at_a_zero_target_is_caught_at_its_division(package, tmp_path):
    import more_real_cases

    model, x, y = more_real_cases.cosine_to_a_zero_target(package=package)
    watch = gradcheck.Watch(tmp_path, diagnose=package == "keras", log=lambda line: None)
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=[watch])
    [snapshot] = watch.snapshots
    assert snapshot.name == "step-000001" and not np.load(snapshot / "batch.npz")["y"][5].any()
    assert all(np.isfinite(w).all() for w in model.get_weights())
    if package == "keras":
        report = json.loads((snapshot / "report.json").read_text())
        [finding] = [c for c in report["checks"] if c["check"] == "non-finite"]
        assert finding["location"].endswith("more_real_cases.py:13")
        assert "RealDiv(-0, 0)" in finding["message"] and "divide_no_nan" in finding["message"]


def test_the_fixed_cosine_loss_trains_with_no_trigger(tmp_path):
    import more_real_cases

    model, x, y = more_real_cases.cosine_to_a_zero_target(more_real_cases.cosine_loss_fixed)
    watch = gradcheck.Watch(tmp_path, diagnose=False, log=lambda line: None)
    model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0, callbacks=[watch])
    assert watch.snapshots == [] and not watch.stopped
    assert all(np.isfinite(w).all() for w in model.get_weights())


def test_a_hand_written_float16_softmax_is_caught_at_its_overflowing_exp(tmp_path):
    import more_real_cases

    model, x, y = more_real_cases.float16_softmax()
    watch = gradcheck.Watch(tmp_path, log=lambda line: None)
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=[watch])
    [snapshot] = watch.snapshots
    assert snapshot.name == "step-000002" and (np.load(snapshot / "batch.npz")["x"][8] == 3).all()
    report = json.loads((snapshot / "report.json").read_text())
    [finding] = [c for c in report["checks"] if c["check"] == "non-finite"]
    assert finding["location"].endswith("more_real_cases.py:38")
    assert "Exp(11.9" in finding["message"]

    fixed, x, y = more_real_cases.float16_softmax(more_real_cases.stable_softmax)
    quiet = gradcheck.Watch(tmp_path / "fixed", diagnose=False, log=lambda line: None)
    fixed.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=[quiet])
    assert quiet.snapshots == [] and all(np.isfinite(w).all() for w in fixed.get_weights())
