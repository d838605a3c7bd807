"""gradcheck.check against tf.test.compute_gradient on twenty new 3-element functions, in one
process after a warm-up: seconds per first check, per second check at a new point, and the ratio
(compute_gradient timed right after each function's two checks, so that all three see the same
machine).

The floor, measured in fresh processes of its own (TensorFlow caches forward mode's per-op
traces by op and shape, so it must not follow gradcheck's calls), before and after them (the
mean of the two follows the machine's drifting load): what TensorFlow itself takes for the
least each check of a first call must do — a `tf.function` VJP (trace and call), the XLA VJP
(trace, compile and call), one ForwardAccumulator JVP, and compute_gradient's own finite
differences and Jacobian — and the same at a new point, traces reused.

Run from a clone: `python benchmarks/small_functions.py [--profile FILE] [--profile-second FILE]`.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE), str(HERE.parent / "fixtures")]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--profile", help="write a cProfile of the first checks here")
    parser.add_argument("--profile-second", help="write a cProfile of the second checks here")
    parser.add_argument("--floor-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor_only:
        print(*the_floors())
        return
    import numpy as np
    from bench import _warm_up
    from many_targets import FUNCTIONS, POINT

    import gradcheck
    from gradcheck.engine.runtime import tensorflow

    tf = tensorflow()
    _warm_up()
    floors_before = _floors_in_fresh_process()
    x, moved = np.asarray(POINT), np.asarray(POINT) + 0.25
    profiles = {which: cProfile.Profile() for which, wanted in
                (("first", args.profile), ("second", args.profile_second)) if wanted}
    times: dict[str, list[float]] = {"first": [], "second": [], "grad": []}

    def timed(which: str, run: Callable[[], object]) -> None:
        profile = profiles.get(which)
        start = time.perf_counter()
        if profile is not None:
            profile.enable()
        run()
        if profile is not None:
            profile.disable()
        times[which].append(time.perf_counter() - start)

    for function in FUNCTIONS:  # each function's three in turn: the same machine for all
        timed("first", lambda: gradcheck.check(function, x))  # noqa: B023
        timed("second", lambda: gradcheck.check(function, moved))  # noqa: B023
        timed("grad", lambda: tf.test.compute_gradient(function, [tf.constant(x)]))  # noqa: B023
    for which, path in (("first", args.profile), ("second", args.profile_second)):
        if path:
            profiles[which].dump_stats(path)
    first, second, grad = (statistics.median(times[k]) for k in ("first", "second", "grad"))
    paired = [statistics.median(g / t for g, t in zip(times["grad"], times[k]))
              for k in ("first", "second")]
    # Before and after gradcheck's calls: the machine's load drifts, the mean follows it.
    floor_first, floor_second = (statistics.mean(pair) for pair in
                                 zip(floors_before, _floors_in_fresh_process()))
    print(f"gradcheck.check, first call: median {first:.3f} s; second call at a new point:"
          f" {second:.3f} s; tf.test.compute_gradient: {grad:.4f} s")
    print(f"ratio compute_gradient / gradcheck: first {grad / first:.3f}x, second"
          f" {grad / second:.3f}x (medians of the per-function ratios: {paired[0]:.3f}x,"
          f" {paired[1]:.3f}x); load average {os.getloadavg()[0]:.1f}")
    print(f"TensorFlow's floor for every check (fresh process): first call {floor_first:.3f} s"
          f" (best ratio possible {grad / floor_first:.3f}x; gradcheck / floor"
          f" {first / floor_first:.2f}), second call {floor_second:.4f} s (best ratio"
          f" {grad / floor_second:.3f}x; gradcheck / floor {second / floor_second:.2f})")


def _floors_in_fresh_process() -> tuple[float, float]:
    floors = subprocess.run([sys.executable, __file__, "--floor-only"], capture_output=True,
                            text=True, check=True).stdout.split()
    return float(floors[-2]), float(floors[-1])


def the_floors() -> tuple[float, float]:
    """Median seconds of TensorFlow's own work for every check of a first call, and of the
    same work at a new point with the traces reused, over the twenty functions."""
    import numpy as np
    from bench import _warm_up
    from many_targets import FUNCTIONS, POINT

    from gradcheck.engine.runtime import tensorflow

    tf = tensorflow()
    _warm_up()

    def vjp_of(function: Callable[..., object]) -> Callable[..., object]:
        def vjp(x: object, upstream: object) -> object:
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = function(x)
            return tape.gradient(y, x, output_gradients=upstream), y
        return vjp

    def least(function: Callable[..., object], x: object, compiled: list[object]) -> float:
        start = time.perf_counter()
        upstream = tf.ones_like(function(x))
        if not compiled:
            compiled += [tf.function(vjp_of(function), autograph=False, jit_compile=jit)
                         for jit in (False, True)]
        for vjp in compiled:
            vjp(x, upstream)  # type: ignore[operator]
        with tf.autodiff.ForwardAccumulator(x, tf.ones_like(x)) as accumulator:
            y = function(x)
        accumulator.jvp(y)
        tf.test.compute_gradient(function, [x])
        return time.perf_counter() - start

    first, second = [], []
    for function in FUNCTIONS:
        compiled: list[object] = []
        first.append(least(function, tf.constant(POINT, tf.float64), compiled))
        second.append(least(function, tf.constant(np.asarray(POINT) + 0.25), compiled))
    return statistics.median(first), statistics.median(second)


if __name__ == "__main__":
    main()
