"""How strong gradcheck is in strict float32 (dtype="float32"): an op sweep of TensorFlow's
elementwise, binary, reduction, linear-algebra and nn ops from the real-world catalogue, each
wrapped in a tf.custom_gradient whose grad_fn returns the true VJP (must pass) or one with a
Jacobian element bumped by 1e-3 or 1e-4 of the block's largest |entry| (must fail).

    python benchmarks/float32_strength.py                 # the op sweep (~100 ops)
    python benchmarks/float32_strength.py --false-alarms  # every core catalogue entry as
                                                          # written, float32 and float32-strict
    python benchmarks/float32_strength.py --json out.json # also write the outcomes

The mutants are tests/real_world_mutants.py's; `caught` is any fail or error, `by differences`
only a jacobian/vjp/fast fail (the jvp check flags any custom gradient forward mode ignores).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from tests.real_world_catalogue import CORE, Case  # noqa: E402
from tests.real_world_mutants import (  # noqa: E402
    MODES,
    Bump,
    Outcome,
    Runner,
    caught_by_differences,
    false_alarm,
    jacobian_block,
    run_one,
)

SWEPT = ("elementwise", "binary", "reduction", "linalg", "nn")
SIZES = (1e-3, 1e-4)
OPTIONS: dict[str, Any] = {"dtype": "float32", "compiled": False}


def sweep_cases() -> list[Case]:
    """The TensorFlow ops of the swept categories (no symmetric-matrix conventions)."""
    return [case for case in CORE if case.library == "tf" and case.category in SWEPT
            and "float32" in case.dtypes and not case.symmetric and not case.defect]


def _block(case: Case, args: tuple[np.ndarray, ...], source: int) -> np.ndarray:
    """J of output 0 in float64, or in float32 for ops without a float64 kernel."""
    try:
        return jacobian_block(case.f, args, source)
    except Exception:  # noqa: BLE001 (a float32-only op, such as LRN)
        import tensorflow as tf

        xs = [tf.constant(a) for a in args]
        with tf.GradientTape() as tape:
            tape.watch(xs[source])
            y = tf.reshape(tf.nest.flatten(case.f(*xs))[0], [-1])
        jacobian = tape.jacobian(y, xs[source])
        return np.asarray(jacobian, dtype=np.float64).reshape(int(y.shape[0]), -1)


def bump_of(case: Case, size: float) -> Bump | None:
    """A seeded element of the first differentiable input's block, bumped by size·max|J|."""
    args = case.arguments("float32")
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    for source in range(len(args)):
        block = _block(case, args, source)
        scale = float(np.max(np.abs(block), initial=0.0))
        if scale > 0.0:
            return Bump(source, int(rng.integers(block.shape[0])),
                        int(rng.integers(block.shape[1])), size * scale)
    return None


def _excess(outcome: Outcome) -> str:
    return "; ".join(f"{check} {status}" for check, status, _, _ in outcome.findings
                     if check in ("jacobian", "vjp") and status != "pass") or "pass"


def op_sweep(log: list[dict[str, Any]]) -> None:
    cases = sweep_cases()
    counts = {"correct": [0, 0]} | {f"{s:g}": [0, 0, 0] for s in SIZES}
    missed: dict[str, list[str]] = {f"{s:g}": [] for s in SIZES}
    alarms: list[str] = []
    seconds = 0.0
    for case in cases:
        args = case.arguments("float32")
        correct = run_one(case.name, case.f, args, "float32-strict", "correct", **OPTIONS)
        seconds += correct.seconds
        counts["correct"][1] += 1
        if correct.failed:
            counts["correct"][0] += 1
            alarms.append(f"{case.name}: {correct.describe()}")
        log.append({"case": case.name, "kind": "correct", "failed": correct.failed,
                    "seconds": correct.seconds})
        for size in SIZES:
            bump = bump_of(case, size)
            if bump is None:
                continue
            outcome = run_one(case.name, case.f, args, "float32-strict", "bumped", bump,
                              **OPTIONS)
            seconds += outcome.seconds
            key = f"{size:g}"
            counts[key][0] += outcome.failed
            counts[key][1] += caught_by_differences(outcome)
            counts[key][2] += 1
            if not caught_by_differences(outcome):
                missed[key].append(case.name)
            log.append({"case": case.name, "kind": f"bumped {key}", "failed": outcome.failed,
                        "by_differences": caught_by_differences(outcome),
                        "seconds": outcome.seconds, "verdict": _excess(outcome)})
        print(f"{case.name}: {log[-1]['verdict'] if log[-1]['kind'] != 'correct' else ''}",
              flush=True)
    print(f"\n{len(cases)} ops, strict float32, {seconds:.0f} s in gradcheck.check")
    print(f"correct custom gradients failed (false alarms): {counts['correct'][0]}"
          f"/{counts['correct'][1]}")
    for alarm in alarms:
        print("  false alarm:", alarm)
    for key in missed:
        caught, by_fd, total = counts[key]
        print(f"bumped by {key}·max|J|: caught {caught}/{total} ({100 * caught / total:.0f}%),"
              f" by finite differences {by_fd}/{total} ({100 * by_fd / total:.0f}%)")
        print(f"  missed by finite differences: {missed[key]}")


def false_alarms(log: list[dict[str, Any]]) -> None:
    runner = Runner()
    for mode in ("float32-strict", "float32"):
        alarms, crashes, seconds = [], [], 0.0
        cases = [case for case in CORE if "float32" in case.dtypes]
        for case in cases:
            outcome = runner.get(case, mode, "plain")
            seconds += outcome.seconds
            if outcome.exception is not None:
                crashes.append(outcome.describe())
            elif false_alarm(case, outcome):
                alarms.append(outcome.describe())
            log.append({"case": case.name, "mode": mode, "kind": "plain",
                        "false_alarm": false_alarm(case, outcome), "seconds": outcome.seconds})
        print(f"{mode}: {len(cases)} functions, {len(alarms)} false alarms, {len(crashes)}"
              f" crashes, {seconds:.0f} s in gradcheck.check", flush=True)
        for line in alarms + crashes:
            print("  ", line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--false-alarms", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    assert MODES["float32-strict"][1] == {"dtype": "float32"}
    log: list[dict[str, Any]] = []
    start = time.perf_counter()
    (false_alarms if args.false_alarms else op_sweep)(log)
    print(f"wall time {time.perf_counter() - start:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(log, indent=1))


if __name__ == "__main__":
    main()
