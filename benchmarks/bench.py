"""gradcheck against tf.test.compute_gradient, fast mode at 10⁷ inputs, Keras models with 10⁶
weights, and the command line end to end; every measurement in a fresh process.

Run from a clone: `python benchmarks/bench.py` (about 15 minutes; `--quick` for a short run;
`--only dense --sizes 100,2000` for two rows of the first table).
The machine may be shared: compare the ratios printed, which come from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGETS = Path(__file__).resolve().parent / "targets.py"
SEED_TARGET = ROOT / "fixtures" / "seed_question_fixed.py"
GRADCHECK = [sys.executable, "-c", "from gradcheck.cli import main; main()"]
SIZES = [100, 500, 1000, 2000, 4000]
QUICK_SIZES = [100, 300]
# compute_gradient is skipped (and extrapolated) when it would take longer than this.
COMPUTE_GRADIENT_LIMIT = 120.0


# ----------------------------------------------------------------------------- in a worker


class PeakMemory:
    """The largest growth of the resident set above its level at the start of the block."""

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


def timed(run: Callable[[], Any]) -> tuple[Any, float, int]:
    with PeakMemory() as memory:
        start = time.perf_counter()
        result = run()
        elapsed = time.perf_counter() - start
    return result, elapsed, memory.peak


class PhaseClock:
    """Seconds spent in each phase gradcheck announces (CheckSettings.phase), by group."""

    GROUPS = (("compiled", "under tf.function"), ("jvp", "forward-mode JVP"),
              ("jacobian", "tape.jacobian"), ("evaluations", "vectorised evaluation"))

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.current = "other"
        self.since = time.perf_counter()

    def __call__(self, phase: Any) -> None:  # a gradcheck.errors.Phase, or its text
        self.stop()
        text = getattr(phase, "text", phase)
        self.current = next((g for g, words in self.GROUPS if words in text), "other")

    def stop(self) -> None:
        now = time.perf_counter()
        self.seconds[self.current] = self.seconds.get(self.current, 0.0) + now - self.since
        self.since = now


def _in_worker() -> None:
    sys.path[:0] = [str(ROOT), str(ROOT / "fixtures")]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _warm_up() -> None:
    """TensorFlow's one-off start-up costs, on an unrelated 3-element function, both tools."""
    import dense_layer
    import numpy as np

    import gradcheck
    from gradcheck.engine.runtime import tensorflow

    tf = tensorflow()
    f, _, x = dense_layer.make(3, seed=7)
    gradcheck.check(f, x)
    tf.test.compute_gradient(f, [tf.constant(np.asarray(x))])


def _check_timed(f: Any, x: Any, mode: str) -> tuple[Any, float, int, dict[str, float]]:
    from gradcheck.api import check_here
    from gradcheck.check_settings import CheckSettings
    from gradcheck.options import CheckOptions

    clock = PhaseClock()
    options, settings = CheckOptions(mode=mode), CheckSettings(phase=clock)
    report, seconds, memory = timed(lambda: check_here(f, (x,), {}, ".", True, options,
                                                       settings))
    clock.stop()
    return report, seconds, memory, clock.seconds


def the_floor(f: Any, x: Any) -> float:
    """One vectorised autodiff Jacobian plus one vectorised batch of the 2n points x ± h."""
    parts = floor_parts(f, x, every_check=False)
    return parts["jacobian"] + parts["evaluations"]


def floor_parts(f: Any, x: Any, every_check: bool = True) -> dict[str, float]:
    """Seconds of TensorFlow's own work for each part of a check of f at x: the vectorised
    autodiff Jacobian, the vectorised batch of the 2n points x ± h and, with `every_check`, what
    the other default checks cannot do without: a `tf.function` VJP and the XLA VJP (traced,
    compiled, called) and one ForwardAccumulator JVP."""
    import numpy as np

    from gradcheck.engine.batch import BatchEvaluator
    from gradcheck.engine.program import Evaluation, Program, Slot
    from gradcheck.engine.runtime import tensorflow
    from gradcheck.numerics import differences

    tf = tensorflow()
    xt = tf.constant(x)
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = f(xt)
    np.asarray(tape.jacobian(y, xt))
    seconds["jacobian"] = time.perf_counter() - start
    start = time.perf_counter()
    bound = Program(f, (Slot("x", 0, None, xt, True, "float64", x.shape),), Evaluation())
    evaluator = BatchEvaluator(bound, 0, [0], [np.asarray(y)], 1 << 30)
    evaluator.evaluate_perturbations(differences.step_sizes(x, "float64"),
                                     differences.FIRST_FACTORS)
    seconds["evaluations"] = time.perf_counter() - start
    if not every_check:
        return seconds
    upstream = tf.constant(np.random.default_rng(0).normal(size=y.shape))

    def vjp(x: Any, u: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = f(x)
        return tape.gradient(y, x, output_gradients=u)

    for name, jit in (("vjp", False), ("xla_vjp", True)):
        start = time.perf_counter()
        np.asarray(tf.function(vjp, autograph=False, jit_compile=jit)(xt, upstream))
        seconds[name] = time.perf_counter() - start
    start = time.perf_counter()
    with tf.autodiff.ForwardAccumulator(xt, tf.ones_like(xt)) as accumulator:
        y = f(xt)
    np.asarray(accumulator.jvp(y))
    seconds["jvp"] = time.perf_counter() - start
    return seconds


def worker_dense(n: int, run_compute_gradient: bool) -> dict[str, Any]:
    """First and warm gradcheck.check (full mode) at n, the floor, compute_gradient."""
    import dense_layer
    import numpy as np

    from gradcheck.engine.runtime import tensorflow

    tf = tensorflow()
    _warm_up()
    f, analytic_of, x = dense_layer.make(n)
    analytic = analytic_of(x)
    scale = float(np.max(np.abs(analytic)))
    report, first, memory, phases = _check_timed(f, x, "full")
    _, warm, _, warm_phases = _check_timed(f, x, "full")
    floor = the_floor(f, x)
    jacobian = next(c for c in report.checks if c.check == "jacobian")
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = f(xt)
    autodiff_err = float(np.max(np.abs(np.asarray(tape.jacobian(y, xt)) - analytic)))
    row: dict[str, Any] = {
        "n": n, "ok": report.ok, "first_s": first, "warm_s": warm, "floor_s": floor,
        "phases": phases, "warm_phases": warm_phases, "memory": memory,
        # max |FD - analytic| <= |FD - autodiff| (reported by the check) + |autodiff - analytic|
        "gradcheck_err": ((jacobian.max_abs_err or 0.0) + autodiff_err) / scale,
    }
    if run_compute_gradient:
        (_, numerical), seconds, cg_memory = timed(
            lambda: tf.test.compute_gradient(f, [tf.constant(x)]))
        row.update(compute_gradient_s=seconds, compute_gradient_memory=cg_memory,
                   compute_gradient_err=float(np.max(np.abs(numerical[0] - analytic))) / scale)
    return row


def worker_seed() -> dict[str, Any]:
    """The seed question's 2-element function: first gradcheck.check vs compute_gradient."""
    import numpy as np
    import seed_question_fixed

    import gradcheck
    from gradcheck.engine.runtime import tensorflow

    tf = tensorflow()
    _warm_up()
    x = np.array([1.0, 2.0], dtype=np.float32)  # its grad_fn computes in float32
    report, first, _ = timed(lambda: gradcheck.check(seed_question_fixed.f, x))
    _, warm, _ = timed(lambda: gradcheck.check(seed_question_fixed.f, x))
    _, cg, _ = timed(lambda: tf.test.compute_gradient(seed_question_fixed.f, [tf.constant(x)]))
    return {"ok": report.ok, "first_s": first, "warm_s": warm, "compute_gradient_s": cg}


def worker_one_evaluation(name: str) -> dict[str, Any]:
    """Seconds for one call of a benchmark target (median of three, after one)."""
    import numpy as np
    import targets

    from gradcheck.engine.runtime import tensorflow

    tf = tensorflow()
    f = getattr(targets, name)
    (x,) = getattr(targets, f"{name}_inputs")
    np.asarray(f(tf.constant(x)))
    times = []
    for _ in range(3):
        start = time.perf_counter()
        np.asarray(f(tf.constant(x)))
        times.append(time.perf_counter() - start)
    xt = tf.constant(x)
    start = time.perf_counter()
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = f(tf.identity(xt))
    np.asarray(tape.gradient(y, xt, output_gradients=tf.ones_like(y)))
    return {"evaluation_s": statistics.median(times),
            "forward_backward_s": time.perf_counter() - start}


def worker_dense_floor(n: int) -> dict[str, Any]:
    """The floor on a first call: in a process of its own, warmed up as worker_dense's is, the
    floor measured before anything else has run at n (gradcheck's first call pays the same
    first tape.jacobian and first vectorised batch), then once more."""
    import dense_layer

    _warm_up()
    f, _, x = dense_layer.make(n)
    return {"first_floor_s": the_floor(f, x), "warm_floor_s": the_floor(f, x)}


def worker_first_call(n: int, which: str) -> dict[str, Any]:
    """One first call at n in a process of its own, warmed up as worker_dense's is: gradcheck's
    (every check of `gradcheck check`, full mode), or TensorFlow's floor in parts."""
    import dense_layer

    _warm_up()
    f, _, x = dense_layer.make(n)
    cpu = time.process_time()
    if which == "floor":
        parts = floor_parts(f, x)
        return {"seconds": sum(parts.values()), "cpu_s": time.process_time() - cpu, **parts}
    _, seconds, _, phases = _check_timed(f, x, "full")
    return {"seconds": seconds, "cpu_s": time.process_time() - cpu, **phases}


WORKERS: dict[str, Callable[..., dict[str, Any]]] = {
    "first-call": lambda n, which: worker_first_call(int(n), which),
    "dense": lambda n, cg: worker_dense(int(n), cg == "1"),
    "dense-floor": lambda n: worker_dense_floor(int(n)),
    "seed": worker_seed,
    "evaluation": worker_one_evaluation,
}


# ----------------------------------------------------------------------------- the parent


def in_fresh_process(kind: str, *args: str, env: dict[str, str] | None = None
                     ) -> dict[str, Any]:
    """Run a worker in a new Python process; its last stdout line is its JSON result."""
    done = subprocess.run([sys.executable, __file__, "--worker", kind, *args],
                          capture_output=True, text=True, env={**os.environ, **(env or {})},
                          check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"worker {kind} {args} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(lines[-1]))


def command(argv: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Wall time, exit code, stdout and the peak resident memory of a command and the
    processes it waited for (the gradcheck worker included)."""
    script = ("import json, resource, subprocess, sys, time\n"
              "start = time.perf_counter()\n"
              "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
              "print(json.dumps({'seconds': time.perf_counter() - start, 'exit': done.returncode,"
              " 'stdout': done.stdout, 'stderr': done.stderr[-2000:], 'max_rss':"
              " resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}))\n")
    done = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})},
                          cwd=ROOT, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def mib(size: float) -> str:
    return f"{size / 2**20:.0f} MiB"


def compute_gradient_estimate(rows: list[dict[str, Any]], n: int) -> float | None:
    """compute_gradient's time at n from the last two measured sizes (a power law)."""
    measured = [(r["n"], r["compute_gradient_s"]) for r in rows if "compute_gradient_s" in r]
    if len(measured) < 2:
        return None
    import math

    (n1, t1), (n2, t2) = measured[-2:]
    power = math.log(t2 / t1) / math.log(n2 / n1)
    return float(t2 * (n / n2) ** power)


def dense_rows(sizes: list[int]) -> list[dict[str, Any]]:
    print("\n## First and warm call against tf.test.compute_gradient (one fresh process per n)\n")
    print("function: tanh(W x) * |x|^2, float64, W dense n x n; each process first warms"
          " TensorFlow up on an unrelated 3-element function (gradcheck.check and"
          " compute_gradient), then runs gradcheck.check(f, x, mode='full') twice (first and"
          " warm call: every check of `gradcheck check`), the floor (one vectorised"
          " tape.jacobian + one vectorised batch of the 2n points x ± h), and compute_gradient."
          " Errors are max abs error against the analytic Jacobian over max |J|.\n")
    header = ("| n | first call | warm call | compute_gradient | speed-up, first | speed-up,"
              " warm | floor | warm / floor | warm w/o compiled, jvp / floor | first: compiled,"
              " jvp, jacobian, evaluations, other | first w/o compiled: speed-up |"
              " gradcheck err | compute_gradient err |"
              " peak memory (check / compute_gradient) | first-call floor (own process) |"
              " first / first-call floor |")
    print(header)
    print("|" + "---|" * header.count(" | ") + "---|")
    rows: list[dict[str, Any]] = []
    for n in sizes:
        estimate = compute_gradient_estimate(rows, n)
        run_cg = estimate is None or estimate <= COMPUTE_GRADIENT_LIMIT
        row = in_fresh_process("dense", str(n), "1" if run_cg else "0")
        if not run_cg:
            row["compute_gradient_s"] = estimate
            row["extrapolated"] = True
        row.update(in_fresh_process("dense-floor", str(n)))
        rows.append(row)
        cg = row["compute_gradient_s"]
        mark = " (extrapolated)" if row.get("extrapolated") else ""
        p = row["phases"]
        split = ", ".join(f"{p.get(k, 0.0):.2f}" for k in
                          ("compiled", "jvp", "jacobian", "evaluations", "other"))
        without = row["first_s"] - p.get("compiled", 0.0)
        w = row["warm_phases"]
        warm_core = row["warm_s"] - w.get("compiled", 0.0) - w.get("jvp", 0.0)
        cg_err = f"{row['compute_gradient_err']:.1e}" if "compute_gradient_err" in row else "-"
        cg_mem = mib(row["compute_gradient_memory"]) if "compute_gradient_memory" in row else "-"
        print(f"| {n} | {row['first_s']:.2f} s | {row['warm_s']:.2f} s | {cg:.2f} s{mark} |"
              f" {cg / row['first_s']:.1f}x | {cg / row['warm_s']:.1f}x |"
              f" {row['floor_s']:.2f} s | {row['warm_s'] / row['floor_s']:.2f}x |"
              f" {warm_core / row['floor_s']:.2f}x | {split} s |"
              f" {cg / without:.1f}x | {row['gradcheck_err']:.1e} | {cg_err} |"
              f" {mib(row['memory'])} / {cg_mem} | {row['first_floor_s']:.2f} s |"
              f" {row['first_s'] / row['first_floor_s']:.2f}x |"
              + ("" if row["ok"] else " (check FAILED)"),
              flush=True)
    return rows


def first_call_rows(sizes: list[int], repeats: int) -> None:
    """Issue 31's goal: a first call at n against TensorFlow's floor for it, each in a fresh
    process, alternating, `repeats` times; medians."""
    print(f"\n## First call against TensorFlow's floor (fresh processes, alternating, medians of"
          f" {repeats})\n")
    print("The issue's floor: one vectorised tape.jacobian + one vectorised batch of the 2n"
          " points x ± h. The floor of every check adds what the compiled and jvp checks"
          " cannot do without: a tf.function VJP, the XLA VJP (trace, compile, call) and one"
          " ForwardAccumulator JVP. CPU is the process's CPU time (both cores count).\n")
    header = ("| n | gradcheck first call (CPU) | issue's floor: jacobian + evaluations |"
              " + VJP, XLA VJP, JVP | ratio to the issue's floor | ratio to every check's"
              " floor | CPU ratio to every check's floor | gradcheck by phase: jacobian,"
              " evaluations, compiled, jvp, other |")
    print(header)
    print("|" + "---|" * header.count(" | ") + "---|")
    for n in sizes:
        runs: dict[str, list[dict[str, Any]]] = {"gradcheck": [], "floor": []}
        for _ in range(repeats):
            for which in runs:
                runs[which].append(in_fresh_process("first-call", str(n), which))

        def median(which: str, key: str, runs: dict[str, list[dict[str, Any]]] = runs
                   ) -> float:
            return float(statistics.median(run.get(key, 0.0) for run in runs[which]))

        check, cpu = median("gradcheck", "seconds"), median("gradcheck", "cpu_s")
        issue = median("floor", "jacobian") + median("floor", "evaluations")
        every = median("floor", "seconds")
        extra = ", ".join(f"{median('floor', k):.2f}" for k in ("vjp", "xla_vjp", "jvp"))
        split = ", ".join(f"{median('gradcheck', k):.2f}" for k in
                          ("jacobian", "evaluations", "compiled", "jvp", "other"))
        # Each first call against the floor measured beside it: min and median of the ratios.
        paired = [g["seconds"] / (f["jacobian"] + f["evaluations"])
                  for g, f in zip(runs["gradcheck"], runs["floor"])]
        print(f"| {n} | {check:.2f} s ({cpu:.2f} s) | {median('floor', 'jacobian'):.2f} +"
              f" {median('floor', 'evaluations'):.2f} = {issue:.2f} s | {extra}: {every:.2f} s |"
              f" {check / issue:.2f}x (per run: min {min(paired):.2f}x, median"
              f" {statistics.median(paired):.2f}x) | {check / every:.2f}x |"
              f" {cpu / median('floor', 'cpu_s'):.2f}x | {split} s |", flush=True)


def seed_row() -> None:
    row = in_fresh_process("seed")
    print(f"\nthe seed's 2-element function (fixtures/seed_question_fixed.py), fresh process:"
          f" first gradcheck.check {row['first_s']:.2f} s (warm {row['warm_s']:.2f} s),"
          f" compute_gradient {row['compute_gradient_s']:.2f} s: speed-up"
          f" {row['compute_gradient_s'] / row['first_s']:.2f}x first,"
          f" {row['compute_gradient_s'] / row['warm_s']:.2f}x warm;"
          f" {'passed' if row['ok'] else 'FAILED'}", flush=True)


def fast_rows(size: int) -> None:
    env = {"GRADCHECK_BENCH_N": str(size)}
    print(f"\n## Fast mode from the command line, n = {size:,}\n")
    print("`gradcheck check benchmarks/targets.py:NAME --format json` (every check; --mode"
          " auto chooses fast mode), a stable softplus with a custom gradient, correct and"
          " wrong on 1 % of the elements; default --max-memory.\n")
    print("| function | wall time | verdict | evaluations of f | backward passes | one"
          " evaluation | one forward + backward | where the error was found |"
          " peak memory (largest process) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in ("softplus_correct", "softplus_wrong"):
        one = in_fresh_process("evaluation", name, env=env)
        run = command([*GRADCHECK, "check", f"{TARGETS}:{name}", "--format", "json"], env)
        report = json.loads(run["stdout"]) if run["stdout"].strip() else {}
        fast = next((c for c in report.get("checks", []) if c["check"] == "fast"), None)
        details = fast["details"] if fast else {}
        elements = details.get("elements")
        where = ", ".join(f"[{a}..{b})" if b - a > 1 else f"x[{a}]" for a, b in elements) \
            if elements else "-"
        print(f"| {name} | {run['seconds']:.1f} s | exit {run['exit']}"
              f" ({fast['status'] if fast else 'no fast check'}) |"
              f" {details.get('evaluations', '-')} | {details.get('backward_passes', '-')} |"
              f" {one['evaluation_s']:.2f} s | {one['forward_backward_s']:.2f} s | {where} |"
              f" {mib(run['max_rss'])} |", flush=True)


def keras_rows() -> None:
    print("\n## Keras models with 10⁶ weights, fast mode over all weights, from the command"
          " line\n")
    print("`gradcheck check benchmarks/targets.py:FACTORY --format json`: the factory builds"
          " the model under a float64 policy; inputs and every trainable weight are sources,"
          " checked at once by random projections (--mode auto).\n")
    print("| model | weights | wall time | beyond the TensorFlow import | verdict |"
          " evaluations of f | backward passes | peak memory |")
    print("|---|---|---|---|---|---|---|---|")
    floor = import_floor(1)
    for name, weights in (("mlp", "1 053 194"), ("cnn", "1 033 796")):
        run = command([*GRADCHECK, "check", f"{TARGETS}:{name}", "--format", "json"])
        report = json.loads(run["stdout"]) if run["stdout"].strip() else {}
        checks = report.get("checks", [])
        fast = [c for c in checks if c["check"] == "fast"]
        details = fast[0]["details"] if fast else {}
        failed = [c["check"] for c in checks if c["status"] == "fail"]
        verdict = f"exit {run['exit']}" + (f", failed: {', '.join(failed)}" if failed else "")
        print(f"| {name} | {weights} | {run['seconds']:.1f} s | {run['seconds'] - floor:.1f} s |"
              f" {verdict} | {details.get('evaluations', '-')} |"
              f" {details.get('backward_passes', '-')} | {mib(run['max_rss'])} |", flush=True)


def import_floor(repeats: int) -> float:
    return statistics.median(
        command([sys.executable, "-c", "import tensorflow"])["seconds"] for _ in range(repeats))


def end_to_end(repeats: int) -> None:
    print("\n## End to end from a shell\n")
    floors, checks = [], []
    for _ in range(repeats):  # alternated, so that both see the same machine
        floors.append(command([sys.executable, "-c", "import tensorflow"])["seconds"])
        run = command([*GRADCHECK, "check", f"{SEED_TARGET}:f", "-i", "[1.0, 2.0]"])
        checks.append(run["seconds"])
        if run["exit"] != 0:
            print(f"gradcheck check exited {run['exit']}: {run['stderr']}")
    floor, check = statistics.median(floors), statistics.median(checks)
    print(f"`gradcheck check fixtures/seed_question_fixed.py:f -i '[1.0, 2.0]'`: median"
          f" {check:.2f} s over {repeats} runs; `python -c 'import tensorflow'`: median"
          f" {floor:.2f} s; overhead beyond the import {check - floor:.2f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true",
                        help="n in {100, 300}, fast mode on 10^5, one end-to-end run")
    parser.add_argument("--only", action="append",
                        choices=["dense", "first-call", "seed", "fast", "keras",
                                 "end-to-end"],
                        help="run only these parts (repeatable)")
    parser.add_argument("--sizes", type=lambda text: [int(n) for n in text.split(",")],
                        help="the n of the dense rows, comma-separated (e.g. 100,2000)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="fresh processes per measurement of the first-call part")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _in_worker()
        kind, *rest = args.worker
        print(json.dumps(WORKERS[kind](*rest)))
        return
    parts = set(args.only or ["dense", "first-call", "seed", "fast", "keras", "end-to-end"])
    versions = subprocess.run(
        [sys.executable, "-c", "import tensorflow as tf, keras; print(tf.__version__,"
         " keras.__version__, len(tf.config.list_physical_devices('GPU')))"],
        capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        check=True).stdout.split()
    print(f"machine: {os.cpu_count()} cores, {platform.machine()}, Python"
          f" {platform.python_version()}, TensorFlow {versions[0]}, Keras {versions[1]},"
          f" GPUs: {versions[2]}; load average at the start {os.getloadavg()[0]:.1f}")
    if "dense" in parts:
        dense_rows(args.sizes or (QUICK_SIZES if args.quick else SIZES))
    if "first-call" in parts:
        first_call_rows(args.sizes or [2000], args.repeats)
    if "seed" in parts:
        seed_row()
    if "fast" in parts:
        fast_rows(100_000 if args.quick else 10_000_000)
    if "keras" in parts and not args.quick:
        keras_rows()
    if "end-to-end" in parts:
        end_to_end(1 if args.quick else 3)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}; peak resident memory of this"
          f" process {mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)}")


if __name__ == "__main__":
    main()
