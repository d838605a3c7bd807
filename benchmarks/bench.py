"""gradcheck's full check against tf.test.compute_gradient, and fast mode on a million inputs.

Run from a clone: `python benchmarks/bench.py` (add `--quick` for a smaller run).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "fixtures")]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

import gradcheck  # noqa: E402
from gradcheck.numerics import differences  # noqa: E402
from gradcheck.tf import program  # noqa: E402
from gradcheck.tf.runtime import tensorflow  # noqa: E402


class PeakMemory:
    """The largest resident set size above the starting one while the block runs."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()

    @staticmethod
    def rss() -> int:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss() - self.start)
            time.sleep(0.005)

    def __enter__(self) -> PeakMemory:
        self.start = self.rss()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.thread.join()


# The peak is the growth of the resident set during the call: pages freed by earlier work and
# reused do not count, which is why the first large run is the meaningful one.
def timed(run: Callable[[], Any]) -> tuple[Any, float, int]:
    with PeakMemory() as memory:
        start = time.perf_counter()
        result = run()
        elapsed = time.perf_counter() - start
    return result, elapsed, memory.peak


def the_limit(f: Callable[..., Any], x: np.ndarray) -> tuple[float, np.ndarray]:
    """One vectorised autodiff Jacobian plus one vectorised batch of 2n evaluations (seconds),
    and the autodiff Jacobian itself for the accuracy column."""
    tf = tensorflow()
    xt = tf.constant(x)
    start = time.perf_counter()
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = f(xt)
    jacobian = tape.jacobian(y, xt)
    bound = program.Program(f, [program.Slot("x", 0, None, xt, True, "float64", x.shape)],
                               "float64")
    evaluator = program.BatchEvaluator(bound, 0, [0], [np.asarray(y)], 1 << 30)
    evaluator.evaluate_perturbations(differences.step_sizes(x, "float64"),
                                     differences.FIRST_FACTORS)
    return time.perf_counter() - start, np.asarray(jacobian)


def dense_row(n: int) -> dict[str, Any]:
    import dense_layer

    tf = tensorflow()
    f, analytic_of, x = dense_layer.make(n)
    analytic = analytic_of(x)
    scale = float(np.max(np.abs(analytic)))
    report, t_gc, mem_gc = timed(lambda: gradcheck.check(f, x, mode="full"))
    (jacobian,) = [c for c in report.checks if c.check == "jacobian"]
    (theoretical, numerical), t_cg, _ = timed(
        lambda: tf.test.compute_gradient(f, [tf.constant(x)]))
    limit, autodiff_jacobian = the_limit(f, x)
    autodiff_err = float(np.max(np.abs(autodiff_jacobian - analytic)))
    return {
        "n": n, "ok": report.ok,
        "gradcheck_s": t_gc, "compute_gradient_s": t_cg, "speedup": t_cg / t_gc,
        "limit_s": limit, "vs_limit": t_gc / limit,
        # max |FD - analytic| <= |FD - autodiff| (reported by the check) + |autodiff - analytic|
        "gradcheck_err": ((jacobian.max_abs_err or 0.0) + autodiff_err) / scale,
        "compute_gradient_err": float(np.max(np.abs(numerical[0] - analytic))) / scale,
        "gradcheck_mem": mem_gc,
    }


def fast_row(n: int) -> dict[str, Any]:
    import large_correct

    tf = tensorflow()
    x = large_correct.f_inputs[0][:n]
    xt = tf.constant(x)
    large_correct.f(xt)
    evaluations = []
    for _ in range(5):
        start = time.perf_counter()
        np.asarray(large_correct.f(tf.constant(x)))
        evaluations.append(time.perf_counter() - start)
    one = float(np.median(evaluations))
    report, t_fast, mem = timed(
        lambda: gradcheck.check(large_correct.f, x, mode="fast", kinds=frozenset({"fast"})))
    (result,) = [c for c in report.checks if c.check == "fast"]
    return {"n": n, "ok": report.ok, "fast_s": t_fast, "one_evaluation_s": one,
            "in_evaluations": t_fast / one, "evaluations": result.details["evaluations"],
            "backward_passes": result.details["backward_passes"], "mem": mem}


def mib(size: int) -> str:
    return f"{size / 2**20:.0f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="n in {100, 300}; fast mode on 10^5")
    args = parser.parse_args()
    sizes = [100, 300] if args.quick else [100, 500, 1000, 2000]
    fast_n = 100_000 if args.quick else 1_000_000
    tf = tensorflow()
    print(f"machine: {os.cpu_count()} cores, {platform.machine()}, Python"
          f" {platform.python_version()}, TensorFlow {tf.__version__}, GPUs:"
          f" {len(tf.config.list_physical_devices('GPU'))}")
    print("function: tanh(W x) * |x|^2, float64, W dense n x n; errors are max abs error"
          " against the analytic Jacobian over max |J|")
    header = ("| n | gradcheck check | compute_gradient | speed-up | Jacobian + 2n evals |"
              " check / that | gradcheck err | compute_gradient err | check's peak memory |")
    print(header)
    print("|" + "---|" * header.count(" | ") + "---|")
    gradcheck.check(*dense_layer_warmup())  # TensorFlow's one-off start-up costs
    for n in sizes:
        row = dense_row(n)
        print(f"| {n} | {row['gradcheck_s']:.2f} s | {row['compute_gradient_s']:.2f} s |"
              f" {row['speedup']:.1f}x | {row['limit_s']:.2f} s | {row['vs_limit']:.2f}x |"
              f" {row['gradcheck_err']:.1e} | {row['compute_gradient_err']:.1e} |"
              f" {mib(row['gradcheck_mem'])} |"
              + ("" if row["ok"] else " (check FAILED)"), flush=True)
    row = fast_row(fast_n)
    print(f"\nfast mode, n = {fast_n} (stable softplus with a custom gradient): "
          f"{row['fast_s']:.2f} s = {row['in_evaluations']:.1f} evaluations of f"
          f" ({row['one_evaluation_s'] * 1000:.1f} ms each); it ran {row['evaluations']}"
          f" evaluations and {row['backward_passes']} backward passes; peak memory"
          f" {mib(row['mem'])}; {'passed' if row['ok'] else 'FAILED'}")
    print(f"peak resident memory of the whole process: {mib(peak_rss())}")


def peak_rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def dense_layer_warmup() -> tuple[Any, ...]:
    import dense_layer

    f, _, x = dense_layer.make(8)
    return f, x


if __name__ == "__main__":
    main()
