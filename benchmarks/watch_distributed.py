"""gradcheck.Watch's cost per step under MultiWorkerMirroredStrategy: a real cluster of local
worker processes (fixtures/training/distributed/cluster.py: TF_CONFIG on localhost ports),
tf-keras fit of a small dense model with nothing to trigger, plain and watched in alternating
order, with a third run whose only callback has an empty on_train_batch_end (what any
batch-level callback costs tf-keras' loop); each run fits once (tracing) and then times
`--epochs` more epochs on the chief.

Run from a clone: `python benchmarks/watch_distributed.py [--workers 2] [--rounds 3]
[--rows 2048] [--epochs 2]`. Each worker is a whole TensorFlow process (about 750 MiB).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTED = ROOT / "fixtures" / "training" / "distributed"
sys.path.insert(0, str(DISTRIBUTED))


def main() -> None:
    from cluster import run_cluster

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=2048, help="rows per worker")
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs per run")
    arguments = parser.parse_args()
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(DISTRIBUTED)])
    flags = {"plain fit": ["--plain"], "plain, a batch-end hook": ["--plain", "--batch-hook"],
             "gradcheck.Watch": []}
    seconds: dict[str, list[float]] = {name: [] for name in flags}
    for round_ in range(arguments.rounds):
        for name in list(seconds) if round_ % 2 else list(seconds)[::-1]:
            with tempfile.TemporaryDirectory() as folder:
                command = [sys.executable, str(DISTRIBUTED / "multiworker.py"), "fit",
                           "tf_keras", str(Path(folder) / "snaps"), "--finite", "--rows",
                           str(arguments.rows), "--timed", str(arguments.epochs),
                           *flags[name]]
                codes, errors, results, _ = run_cluster(arguments.workers, command, folder,
                                                        timeout=900)
                if codes != [0] * arguments.workers:
                    raise SystemExit(f"a worker failed: {errors}")
                seconds[name].append(results[0]["seconds_per_step"])
    print(f"MultiWorkerMirroredStrategy, {arguments.workers} local workers, tf-keras fit,"
          f" {arguments.rounds} rounds")
    print(f"  {'run':<24} {'min ms/step':>12} {'median':>9} {'x plain: median':>16} {'min':>7}")
    for name, values in seconds.items():
        paired = [v / p for v, p in zip(values, seconds["plain fit"])]
        print(f"  {name:<24} {1000 * min(values):12.3f} {1000 * statistics.median(values):9.3f}"
              f" {statistics.median(paired):16.3f} {min(paired):7.3f}")


if __name__ == "__main__":
    main()
