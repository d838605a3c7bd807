"""gradcheck.check against tf.test.compute_gradient on twenty new 3-element functions, in one
process after a warm-up: seconds per first check, per second check at a new point, and the ratio
(compute_gradient timed right after each function's two checks, so that all three see the same
machine).

Run from a clone: `python benchmarks/small_functions.py [--profile FILE] [--profile-second FILE]`.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import statistics
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
    args = parser.parse_args()
    import numpy as np
    from bench import _warm_up
    from many_targets import FUNCTIONS, POINT

    import gradcheck
    from gradcheck.tf.runtime import tensorflow

    tf = tensorflow()
    _warm_up()
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
    print(f"gradcheck.check, first call: median {first:.3f} s; second call at a new point:"
          f" {second:.3f} s; tf.test.compute_gradient: {grad:.4f} s")
    print(f"ratio compute_gradient / gradcheck: first {grad / first:.3f}x, second"
          f" {grad / second:.3f}x (medians of the per-function ratios: {paired[0]:.3f}x,"
          f" {paired[1]:.3f}x); load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
