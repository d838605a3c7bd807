"""`gradcheck run` over twenty small checks against tf.test.compute_gradient over the same twenty
functions in one process: seconds per check beyond a bare worker's start-up, and the ratio; and
against TensorFlow's floor for a first call's checks (small_functions.py's, in a fresh process
alternated with the runs): the per-check ratio, min and median over the runs.

Run from a clone: `python benchmarks/run_many.py [--repeats N] [-j N]`. The machine may be shared:
compare the ratios printed, which come from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]
GRADCHECK = [sys.executable, "-c", "from gradcheck.cli import main; main()"]
POINT = [0.5, -1.0, 2.0]  # many_targets.POINT, without importing TensorFlow here
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
       "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def write_config(folder: Path, count: int) -> Path:
    lines = ["[tool.gradcheck]", ""]
    for index in range(1, count + 1):
        lines += ["[[tool.gradcheck.check]]",
                  f'target = "{HERE / "many_targets.py"}:f{index:02d}"',
                  f'input = ["{POINT}"]', ""]
    path = folder / f"run{count}.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def timed_command(argv: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=ENV, cwd=ROOT, check=False)
    return time.perf_counter() - start, done


def run_seconds(config: Path, jobs: str) -> float:
    seconds, done = timed_command([*GRADCHECK, "run", "--config", str(config), "-j", jobs,
                                   "--format", "json"])
    if done.returncode != 0:
        sys.exit(f"gradcheck run exited {done.returncode}:\n{done.stderr[-3000:]}")
    return seconds


def bare_worker() -> None:
    """A worker process started and ready, as `gradcheck run` starts one, and nothing run in it."""
    from gradcheck.processes.workers import WorkerProcess, stop_workers

    member = WorkerProcess()
    member.connection.recv()  # its first message: ready (or broken)
    member.kill()
    stop_workers()


def compute_gradient_seconds() -> float:
    """Seconds for tf.test.compute_gradient over the twenty functions, after the import."""
    import numpy as np
    import tensorflow as tf
    from many_targets import FUNCTIONS

    start = time.perf_counter()
    for function in FUNCTIONS:
        tf.test.compute_gradient(function, [tf.constant(np.asarray(POINT))])
    return time.perf_counter() - start


def first_call_floor() -> float:
    """TensorFlow's floor for every check of a first call, the median over the twenty functions
    (small_functions.the_floors, in a fresh process)."""
    done = subprocess.run([sys.executable, str(HERE / "small_functions.py"), "--floor-only"],
                          capture_output=True, text=True, env=ENV, cwd=ROOT, check=True)
    return float(done.stdout.split()[-2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("-j", default="1", help="gradcheck run's -j")
    parser.add_argument("--part", choices=["bare", "compute-gradient"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part == "bare":
        bare_worker()
        return
    if args.part == "compute-gradient":
        print(json.dumps(compute_gradient_seconds()))
        return
    me = [sys.executable, __file__]
    with tempfile.TemporaryDirectory() as folder:
        configs = {count: write_config(Path(folder), count) for count in (1, 20)}
        bares, runs, ones, grads, floors = [], [], [], [], []
        for _ in range(args.repeats):  # alternated, so that each sees the same machine
            bares.append(timed_command([*me, "--part", "bare"])[0])
            runs.append(run_seconds(configs[20], args.j))
            ones.append(run_seconds(configs[1], args.j))
            grads.append(json.loads(timed_command([*me, "--part", "compute-gradient"])[1]
                                    .stdout.strip().splitlines()[-1]))
            floors.append(first_call_floor())
    bare, run, one, grad = (statistics.median(values) for values in (bares, runs, ones, grads))
    # Each run against the bare worker and the floor measured beside it.
    ratios = [(r - b) / 20 / f for r, b, f in zip(runs, bares, floors)]
    later = [(r - o) / 19 / f for r, o, f in zip(runs, ones, floors)]
    per_check, per_function = (run - bare) / 20, grad / 20
    print(f"gradcheck run over 20 checks (-j {args.j}): median {run:.2f} s; a bare worker's"
          f" start-up {bare:.2f} s; per check beyond it {per_check:.3f} s")
    print(f"gradcheck run over 1 check: {one:.2f} s; each of the 19 more checks"
          f" {(run - one) / 19:.3f} s; the rest of a run beyond a bare worker"
          f" {one - bare - (run - one) / 19:.2f} s")
    print(f"tf.test.compute_gradient over the same 20 functions in one process: {grad:.3f} s,"
          f" {per_function:.4f} s per function")
    print(f"per check / TensorFlow's floor for a first call's checks (median"
          f" {statistics.median(floors):.3f} s): min {min(ratios):.2f}x, median"
          f" {statistics.median(ratios):.2f}x; after the first check min {min(later):.2f}x,"
          f" median {statistics.median(later):.2f}x")
    print(f"ratio (compute_gradient per function / gradcheck per check):"
          f" {per_function / per_check:.3f}x over {args.repeats} runs;"
          f" load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
