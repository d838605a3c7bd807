"""What a caught step costs gradcheck.Watch on models from 1e5 to 2.5e7 weights: the time of the
live diagnosis against the model's own training step (TensorFlow's floor for "one forward and
backward pass") and against `tf.debugging.enable_check_numerics` running the same step, its
CPU time (all the process's threads: on a shared machine, steadier than the wall clock), the
memory it adds (peak resident set during the diagnosis over the process's before it), and the
snapshot's size on disk, each also against the weights' own bytes; the load average at the end.

Each model trains with a loss that takes the log of its output; the batch of step 1 drives that
output negative, so Watch stops there and diagnoses the live step.

Run from a clone: `python benchmarks/watch_diagnosis.py [--sizes 1e5,1e6,1e7] [--resnet]
[--device auto|cpu|gpu]`. On a GPU (`auto` takes the first one TensorFlow sees) the snapshot's
values are copied from the device once, at the trigger, and the memory column counts host
memory only (the device's is TensorFlow's allocator's).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
PAGE = os.sysconf("SC_PAGE_SIZE")


def resident() -> int:
    with open("/proc/self/statm") as stream:
        return int(stream.read().split()[1]) * PAGE


class PeakMemory:
    """The largest resident set seen (sampled every 5 ms) while the body runs."""

    def __enter__(self) -> PeakMemory:
        self.before = self.peak = resident()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._done.wait(0.005):
            self.peak = max(self.peak, resident())

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, resident())


def log_loss(y_true: Any, y_pred: Any) -> Any:
    import tensorflow as tf

    return tf.reduce_mean(tf.math.log(y_pred) - y_true)


def mlp(weights: int) -> tuple[Any, Any]:
    """Inputs 256 -> hidden -> 1, hidden chosen for about `weights` weights."""
    import keras
    import numpy as np

    hidden = max(1, int(weights / 258))
    model = keras.Sequential([keras.Input((256,)),
                              keras.layers.Dense(hidden, kernel_initializer="ones",
                                                 bias_initializer="ones"),
                              keras.layers.Dense(1, kernel_initializer="ones",
                                                 bias_initializer="ones")])
    x = np.abs(np.random.default_rng(0).normal(size=(64, 256))).astype("float32") * 1e-3
    x[20] = -1.0  # step 1 (batch 2 of 16): the output turns negative
    return model, x


def resnet() -> tuple[Any, Any]:
    import keras
    import numpy as np

    base = keras.applications.ResNet50(weights=None, input_shape=(96, 96, 3), include_top=False,
                                       pooling="avg")
    model = keras.Sequential([base, keras.layers.Dense(1, activation="softplus")])
    x = np.random.default_rng(0).uniform(size=(32, 96, 96, 3)).astype("float32")
    x[12] = -1e30  # step 3 (batch 4 of 8): NaN through the network
    return model, x


def measure(name: str, build: Any, batch: int) -> dict[str, Any]:
    import keras
    import numpy as np
    import tensorflow as tf

    import gradcheck

    keras.utils.set_random_seed(0)
    model, x = build()
    y = np.zeros((len(x), 1), "float32")
    model.compile(optimizer=keras.optimizers.SGD(1e-9), loss=log_loss)
    count = sum(int(np.prod(v.shape)) for v in model.trainable_weights)
    # The model's own step: on finite batches, the steady state after the first; and the
    # memory a forward and backward pass at the failing batch takes (TensorFlow's floor).
    clean = x[:batch]
    times = []
    for _ in range(6):
        started = time.perf_counter()
        model.train_on_batch(clean, y[:batch])
        times.append(time.perf_counter() - started)
    step = statistics.median(times[1:])
    with PeakMemory() as floor:
        with tf.GradientTape() as tape:
            loss = log_loss(y[:batch], model(x[batch:2 * batch], training=True))
        gradients = [np.asarray(g) for g in tape.gradient(loss, model.trainable_variables)]
    del gradients
    tf.debugging.enable_check_numerics()
    started = time.perf_counter()
    with contextlib.suppress(Exception):  # check_numerics raises at the NaN: its report
        model.train_on_batch(x[batch:2 * batch], y[:batch])
    numerics = time.perf_counter() - started
    tf.debugging.disable_check_numerics()
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        watch = gradcheck.Watch(folder, log=lines.append)
        original = watch._diagnosis
        memory: dict[str, int] = {}
        seconds: list[float] = []
        cpu: list[float] = []

        def timed(*args: Any) -> Any:
            started, processor = time.perf_counter(), time.process_time()
            with PeakMemory() as peak:
                found = original(*args)
            memory.update(before=peak.before, peak=peak.peak)
            seconds.append(time.perf_counter() - started)
            cpu.append(time.process_time() - processor)
            return found

        watch._diagnosis = timed  # type: ignore[method-assign]
        model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0,
                  callbacks=[watch])
        snapshot = watch.snapshots[0] if watch.snapshots else None
        size = sum(p.stat().st_size for p in snapshot.iterdir()) if snapshot else 0
    diagnosed = seconds[0] if seconds else float("nan")
    processor = cpu[0] if cpu else float("nan")
    finding = next((line for line in lines if "snapshot" in line), "no snapshot")
    return {"model": name, "weights": count, "step": step, "numerics": numerics,
            "diagnosis": diagnosed, "cpu": processor,
            "added": memory.get("peak", 0) - memory.get("before", 0),
            "floor": floor.peak - floor.before,
            "size": size, "finding": finding}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e5,1e6,1e7")
    parser.add_argument("--resnet", action="store_true", help="also ResNet50 at 96x96")
    parser.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto",
                        help="where the models train (auto: the first GPU if there is one)")
    options = parser.parse_args()
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    if options.device == "gpu" and not gpus:
        raise SystemExit("Error: --device gpu: TensorFlow sees no GPU on this machine")
    device = gpus[0].name if gpus and options.device != "cpu" else "/CPU:0"
    print(f"device: {device} (TensorFlow {tf.__version__}, {os.cpu_count()} CPU cores)")
    with tf.device(device):
        rows = [measure(f"MLP {float(s):.0e}", lambda s=s: mlp(int(float(s))), 16)
                for s in options.sizes.split(",")]
        if options.resnet:
            rows.append(measure("ResNet50 96x96", resnet, 4))
    print("| model | weights | weights' bytes | train step | check_numerics step | diagnosis |"
          " diagnosis in steps | diagnosis CPU | memory: forward+backward | memory: diagnosis |"
          " diagnosis / weights | snapshot size | snapshot / weights |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        weights = r["weights"] * 4
        print(f"| {r['model']} | {r['weights']:.3g} | {weights / 2**20:.1f} MiB |"
              f" {r['step'] * 1e3:.0f} ms | {r['numerics'] * 1e3:.0f} ms |"
              f" {r['diagnosis']:.2f} s | {r['diagnosis'] / r['step']:.1f} | {r['cpu']:.2f} s |"
              f" {r['floor'] / 2**20:.0f} MiB | {r['added'] / 2**20:.0f} MiB |"
              f" {r['added'] / weights:.2f}x | {r['size'] / 2**20:.1f} MiB |"
              f" {r['size'] / weights:.2f}x |")
    print(f"load average: {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    for r in rows:
        print(f"{r['model']}: {r['finding'][:200]}")


if __name__ == "__main__":
    main()
