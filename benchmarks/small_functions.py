"""gradcheck.check against tf.test.compute_gradient on twenty new 3-element functions, in one
process after a warm-up: seconds per first check, per second check at a new point, and the ratio.

Run from a clone: `python benchmarks/small_functions.py [--profile FILE] [--profile-second FILE]`.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import statistics
import sys
import time
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
    profile = cProfile.Profile() if args.profile else None
    second_profile = cProfile.Profile() if args.profile_second else None
    firsts, seconds, grads = [], [], []
    for function in FUNCTIONS:
        start = time.perf_counter()
        if profile is not None:
            profile.enable()
        gradcheck.check(function, x)
        if profile is not None:
            profile.disable()
        firsts.append(time.perf_counter() - start)
        start = time.perf_counter()
        if second_profile is not None:
            second_profile.enable()
        gradcheck.check(function, moved)
        if second_profile is not None:
            second_profile.disable()
        seconds.append(time.perf_counter() - start)
    for function in FUNCTIONS:
        start = time.perf_counter()
        tf.test.compute_gradient(function, [tf.constant(x)])
        grads.append(time.perf_counter() - start)
    if profile is not None:
        profile.dump_stats(args.profile)
    if second_profile is not None:
        second_profile.dump_stats(args.profile_second)
    first, second, grad = (statistics.median(v) for v in (firsts, seconds, grads))
    print(f"gradcheck.check, first call: median {first:.3f} s; second call at a new point:"
          f" {second:.3f} s; tf.test.compute_gradient: {grad:.4f} s")
    print(f"ratio compute_gradient / gradcheck: first {grad / first:.3f}x, second"
          f" {grad / second:.3f}x; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
