"""gradcheck.Watch's cost in a real fit: milliseconds per step of a tiny MLP (about 1 ms steps,
where any per-step op shows) and of an MNIST-sized CNN at batch 64 and 128 (plain fit, fit with
keras.callbacks.TerminateOnNaN, fit with an empty on_train_batch_end callback (what any
batch-level callback costs Keras' loop), fit with TensorFlow's own LossScaleOptimizer around Adam
(whose tf.cond on finite gradients is the gate's), fit with gradcheck.Watch), one epoch each in
turn, round after round in alternating order in one process so that all five see the same machine,
and the ratios to plain fit paired within each round (min and median: on a shared machine the
min is the least disturbed), with the process's CPU time per step (steadier under load).

Per-step figures are the steady state: every run's step is traced before the rounds. Watch
retraces fit's step once per model (it gates the update in-graph); that one-time cost is its
first watched fit's excess over plain fit's, printed apart. Last, TensorFlow's own
floor for gating an update: a bare training step whose Adam update sits in a tf.cond on finite
gradients (as LossScaleOptimizer's does) against the same step without the cond.

Run from a clone: `python benchmarks/watch_overhead.py [--rounds N] [--repeats N]
[--device auto|cpu|gpu] [--models mlp,cnn,cnn128]`. `--device auto` (the default) runs on the
first GPU when TensorFlow sees one: there the gate's tf.cond waits on the finiteness of every
gradient before the update (as a LossScaleOptimizer's does), a host round trip per step that the
CPU figures do not show.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def mlp() -> Any:
    import keras

    return keras.Sequential([keras.Input((32,)), keras.layers.Dense(128, "relu"),
                             keras.layers.Dense(128, "relu"), keras.layers.Dense(10)])


def cnn() -> Any:  # MNIST-sized: what "a realistic small model" means here
    import keras

    return keras.Sequential([
        keras.Input((28, 28, 1)), keras.layers.Conv2D(16, 3, activation="relu"),
        keras.layers.MaxPooling2D(), keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.MaxPooling2D(), keras.layers.Flatten(), keras.layers.Dense(10)])


def fit_overhead(label: str, build: Callable[[], Any], x: Any, batch: int, arguments: Any
                 ) -> None:
    """Five models from the same weights, each fit with its callbacks one epoch at a time,
    round after round in alternating order (so that all five see the same machine, load
    drifting or not); each epoch timed from its first batch to its end. Reported: each run's
    min and median ms/step, the ratio to plain fit paired within each round (median, min), and
    the CPU time per step (median, paired median).
    """
    import keras
    import numpy as np

    import gradcheck

    y = np.random.default_rng(1).integers(0, 10, size=(len(x),))
    directory = tempfile.mkdtemp(prefix="gradcheck-watch-bench-")
    runs = {"plain fit": [],
            "TerminateOnNaN": [keras.callbacks.TerminateOnNaN()],
            "empty batch-end hook": [keras.callbacks.LambdaCallback(
                on_train_batch_end=lambda batch, logs: None)],
            "LossScaleOptimizer": [],
            "gradcheck.Watch": [gradcheck.Watch(directory, diagnose=False)]}
    models: dict[str, Any] = {}
    setup: dict[str, float] = {}
    for name in runs:
        keras.utils.set_random_seed(0)
        models[name] = build()
        optimizer = keras.optimizers.Adam()
        if name == "LossScaleOptimizer":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        models[name].compile(
            optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        models[name].fit(x[:4 * batch], y[:4 * batch], batch_size=batch, epochs=1, verbose=0,
                         shuffle=False)
    for name in runs:  # the first fit with its callbacks: Watch retraces fit's step here
        started = time.perf_counter()
        models[name].fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False,
                         callbacks=runs[name])
        setup[name] = time.perf_counter() - started
    steps = len(x) // batch
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for round_ in range(arguments.rounds):
        for name in names if round_ % 2 else names[::-1]:
            marks = _clock(keras)
            models[name].fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False,
                             callbacks=[*runs[name], marks[0]])
            seconds[name].append((marks[2][0] - marks[1][0]) / steps)
            cpu[name].append((marks[2][1] - marks[1][1]) / steps)
    print(f"{label}: {steps} steps/epoch, {arguments.rounds} rounds of one epoch each"
          f" (load average {os.getloadavg()[0]:.1f})")
    print(f"  {'run':<20} {'min ms/step':>12} {'median':>9} {'x plain: median':>16} {'min':>7}"
          f" {'CPU ms/step':>12} {'x plain':>8}")
    for name, values in seconds.items():
        paired = [v / p for v, p in zip(values, seconds["plain fit"])]
        paired_cpu = [v / p for v, p in zip(cpu[name], cpu["plain fit"])]
        print(f"  {name:<20} {1000 * min(values):12.3f} {1000 * statistics.median(values):9.3f}"
              f" {statistics.median(paired):16.3f} {min(paired):7.3f}"
              f" {1000 * statistics.median(cpu[name]):12.3f}"
              f" {statistics.median(paired_cpu):8.3f}")
    print(f"  Watch's one-time setup (retracing fit's step):"
          f" {setup['gradcheck.Watch'] - setup['plain fit']:.2f} s")
    same = all(np.array_equal(a, b) for a, b in zip(models["plain fit"].get_weights(),
                                                   models["gradcheck.Watch"].get_weights()))
    print(f"  weights after the watched run bitwise equal to plain fit's: {same}")


def _clock(keras: Any) -> list[Any]:
    """[a callback, then the (wall, CPU) times of an epoch's first batch and of its end]: only
    batch-begin and epoch-end hooks, which leave Keras 3's asynchronous batch-end dispatch on."""
    marks: list[Any] = []
    marks.append(keras.callbacks.LambdaCallback(
        on_train_batch_begin=lambda batch, logs: marks.append(
            (time.perf_counter(), time.process_time())) if batch == 0 else None,
        on_epoch_end=lambda epoch, logs: marks.append(
            (time.perf_counter(), time.process_time()))))
    return marks


def gating_floor(build: Callable[[], Any], x: Any, batch: int, arguments: Any) -> None:
    """TensorFlow's own cost of holding an update behind a tf.cond on finite gradients."""
    import keras
    import numpy as np
    import tensorflow as tf

    y = np.random.default_rng(1).integers(0, 10, size=(len(x),))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def make(gated: bool) -> Callable[[Any, Any], Any]:
        keras.utils.set_random_seed(0)
        model, optimizer = build(), keras.optimizers.Adam()
        optimizer.build(model.trainable_variables)

        @tf.function
        def step(xb: Any, yb: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            pairs = list(zip(grads, model.trainable_variables))
            if not gated:
                optimizer.apply_gradients(pairs)
                return loss
            finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])

            def update() -> Any:
                optimizer.apply_gradients(pairs)
                return tf.constant(True)

            tf.cond(finite, update, lambda: tf.constant(False))
            return loss
        return step

    batches = [(tf.constant(x[i:i + batch]), tf.constant(y[i:i + batch]))
               for i in range(0, len(x) - batch + 1, batch)]
    steps = {"without cond": make(False), "LossScaleOptimizer-style cond": make(True)}
    seconds: dict[str, list[float]] = {name: [] for name in steps}
    for repeat in range(arguments.repeats + 1):
        for name in list(steps) if repeat % 2 else list(steps)[::-1]:
            started = time.perf_counter()
            for xb, yb in batches:
                steps[name](xb, yb)
            if repeat:
                seconds[name].append((time.perf_counter() - started) / len(batches))
    base = statistics.median(seconds["without cond"])
    print("  TensorFlow's floor, a bare tf.function step:")
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"    {name:<30} {1000 * median:9.3f} ms/step {median / base:8.3f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9,
                        help="rounds of one epoch per run, in alternating order")
    parser.add_argument("--repeats", type=int, default=5,
                        help="rounds of the bare-step floor")
    parser.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto",
                        help="where the models train (auto: the first GPU if there is one)")
    parser.add_argument("--models", default="mlp,cnn,cnn128",
                        help="comma-separated: mlp (batch 64, 1-2 ms steps), cnn (batch 64,"
                        " 5-10 ms), cnn128 (the CNN at batch 128, 10 ms and more)")
    arguments = parser.parse_args()

    import numpy as np
    import tensorflow as tf

    device = chosen_device(arguments.device)
    rng = np.random.default_rng(0)
    models = {"mlp": ("MLP 32-128-128-10, batch 64", mlp, 64, (8192, 32)),
              "cnn": ("CNN on 28x28, batch 64", cnn, 64, (2048, 28, 28, 1)),
              "cnn128": ("CNN on 28x28, batch 128", cnn, 128, (4096, 28, 28, 1))}
    print(f"device: {device} (TensorFlow {tf.__version__}, {os.cpu_count()} CPU cores)")
    for key in arguments.models.split(","):
        label, build, batch, shape = models[key.strip()]
        x = rng.normal(size=shape).astype("float32")
        with tf.device(device):
            fit_overhead(label, build, x, batch, arguments)
            gating_floor(build, x, batch, arguments)


def chosen_device(choice: str) -> str:
    """The device string for --device: a GPU is asked for, or taken when present (auto)."""
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    if choice == "gpu" and not gpus:
        raise SystemExit("Error: --device gpu: TensorFlow sees no GPU on this machine")
    return gpus[0].name if gpus and choice != "cpu" else "/CPU:0"


if __name__ == "__main__":
    main()
