"""gradcheck.Watch's cost per step under MultiWorkerMirroredStrategy: a real cluster of local
worker processes (fixtures/training/distributed/cluster.py: TF_CONFIG on localhost ports), each
training the same small dense model with tf-keras fit and nothing to trigger, in five ways: plain
fit, fit with an empty batch-end callback (what any batch-level callback costs tf-keras' loop),
with keras.callbacks.TerminateOnNaN, with TensorFlow's own LossScaleOptimizer (whose tf.cond on
finite gradients is the gate's), and with gradcheck.Watch. Every model is traced first; then
one epoch each in turn, round after round in alternating order, in the same processes, so that
all five see the same machine and the same cluster. Reported, from the chief: each run's min
and median ms/step, its ratio to plain fit paired within each round (median, min), and the
process's CPU time per step (median, paired median: on a loaded machine the steadier figure).

Run from a clone: `python benchmarks/watch_distributed.py [--workers 2] [--rounds 9]
[--rows 2048]`. Each worker is a whole TensorFlow process (about 750 MiB).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTED = ROOT / "fixtures" / "training" / "distributed"
GLOBAL_BATCH = 16
RUNS = ("plain fit", "empty batch-end hook", "TerminateOnNaN", "LossScaleOptimizer",
        "gradcheck.Watch")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--rows", type=int, default=2048, help="rows per worker (and epoch)")
    parser.add_argument("--worker", metavar="RESULT", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.worker:  # one worker of the cluster; RESULT is appended by run_cluster
        worker(arguments)
        return
    sys.path.insert(0, str(DISTRIBUTED))
    from cluster import run_cluster

    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(DISTRIBUTED)])
    command = [sys.executable, __file__, "--rounds", str(arguments.rounds), "--rows",
               str(arguments.rows), "--worker"]
    with tempfile.TemporaryDirectory() as folder:
        codes, errors, results, _ = run_cluster(arguments.workers, command, folder,
                                                timeout=3600)
    if codes != [0] * arguments.workers:
        raise SystemExit(f"a worker failed: {errors}")
    chief = results[0]
    print(f"MultiWorkerMirroredStrategy, {arguments.workers} local workers, tf-keras fit,"
          f" {chief['steps']} steps/epoch, {arguments.rounds} rounds of one epoch each"
          f" (load average before: {chief['load']})")
    print(f"  {'run':<22} {'min ms/step':>12} {'median':>8} {'x plain: median':>16} {'min':>6}"
          f" {'CPU ms/step':>12} {'x plain':>8}")
    wall, cpu = chief["wall"], chief["cpu"]
    for name in RUNS:
        paired = [v / p for v, p in zip(wall[name], wall["plain fit"])]
        paired_cpu = [v / p for v, p in zip(cpu[name], cpu["plain fit"])]
        print(f"  {name:<22} {1000 * min(wall[name]):12.3f}"
              f" {1000 * statistics.median(wall[name]):8.3f} {statistics.median(paired):16.3f}"
              f" {min(paired):6.3f} {1000 * statistics.median(cpu[name]):12.3f}"
              f" {statistics.median(paired_cpu):8.3f}")
    print(f"  weights after the watched run bitwise equal to plain fit's, on every worker:"
          f" {all(r['bitwise'] for r in results)}")


def worker(arguments: Any) -> None:
    """The five models, traced, then fit one epoch each per round; the timings to RESULT."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # Keras 3's fit does not run this strategy
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras
    from shard_losses import euclidean_loss

    import gradcheck

    load = os.getloadavg()[0]
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    index = strategy.cluster_resolver.task_id
    rng = np.random.default_rng(index)
    x = rng.normal(size=(arguments.rows, 3)).astype("float32")
    y = rng.normal(size=(arguments.rows, 2)).astype("float32")
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH).with_options(options)
    callbacks: dict[str, list[Any]] = {
        "plain fit": [], "LossScaleOptimizer": [],
        "empty batch-end hook": [keras.callbacks.LambdaCallback(
            on_train_batch_end=lambda batch, logs: None)],
        "TerminateOnNaN": [keras.callbacks.TerminateOnNaN()],
        "gradcheck.Watch": [gradcheck.Watch(tempfile.mkdtemp(), diagnose=False)]}
    models = {}
    for name in RUNS:
        with strategy.scope():
            keras.utils.set_random_seed(0)
            model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, use_bias=False)])
            optimizer = keras.optimizers.SGD(0.01)
            if name == "LossScaleOptimizer":
                optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
            model.compile(optimizer=optimizer, loss=euclidean_loss)
        model.fit(data, epochs=1, verbose=0, callbacks=callbacks[name])  # traced
        models[name] = model
    wall: dict[str, list[float]] = {name: [] for name in RUNS}
    cpu: dict[str, list[float]] = {name: [] for name in RUNS}
    steps = arguments.rows // GLOBAL_BATCH
    for round_ in range(arguments.rounds):
        for name in RUNS if round_ % 2 else RUNS[::-1]:
            started, used = time.perf_counter(), time.process_time()
            models[name].fit(data, epochs=1, verbose=0, callbacks=callbacks[name])
            wall[name].append((time.perf_counter() - started) / steps)
            cpu[name].append((time.process_time() - used) / steps)
    bitwise = all(np.array_equal(a, b) for a, b in zip(models["plain fit"].get_weights(),
                                                      models["gradcheck.Watch"].get_weights()))
    with open(arguments.worker, "w") as out:
        json.dump({"wall": wall, "cpu": cpu, "steps": steps, "bitwise": bitwise,
                   "load": round(load, 2)}, out)


if __name__ == "__main__":
    main()
