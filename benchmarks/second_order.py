"""The cost of `--order 2` and of `gradcheck hessian` on the benchmark function at n = 500.

Run from a clone: `python benchmarks/second_order.py [--n 500]`. Evaluations count the points
at which f (for finite differences of f) or its gradient (for finite differences of the
gradient, one forward and one backward pass each) was evaluated, vectorised or not.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "fixtures")]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from gradcheck.api import check_here  # noqa: E402
from gradcheck.engine import batch  # noqa: E402
from gradcheck.engine.runtime import tensorflow  # noqa: E402
from gradcheck.options import options_from  # noqa: E402
from gradcheck.report import Report  # noqa: E402

POINTS = {"count": 0}


def _counting(evaluate: Callable[..., Any]) -> Callable[..., Any]:
    def counted(self: Any, steps: np.ndarray, factors: tuple[float, ...], *args: Any,
                elements: Any = None, **kwargs: Any) -> Any:
        POINTS["count"] += len(factors) * (steps.size if elements is None else len(elements))
        return evaluate(self, steps, factors, *args, elements=elements, **kwargs)

    return counted


batch.BatchEvaluator.evaluate_perturbations = _counting(  # type: ignore[method-assign]
    batch.BatchEvaluator.evaluate_perturbations)


def measured(command: str, f: Callable[..., Any], x: np.ndarray,
             **settings: Any) -> tuple[Report, float, int]:
    POINTS["count"] = 0
    options = options_from(command, {"compiled": False, **settings})
    start = time.perf_counter()
    report = check_here(f, (x,), {}, ".", False, options)
    seconds = time.perf_counter() - start
    fast = sum(int(c.evidence.published().get("evaluations", 0)) for c in report.checks
                if c.evidence is not None)  # fast mode's own
    return report, seconds, POINTS["count"] + fast


def main() -> None:
    import dense_layer

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=500)
    n = parser.parse_args().n
    tf = tensorflow()
    f, _, x = dense_layer.make(n)

    def scalar(x: Any) -> Any:
        return tf.reduce_sum(f(x))

    measured("check", *dense_layer.make(8)[::2])  # TensorFlow's one-off start-up costs
    rows = [("check (first order, no compiled)", *measured("check", f, x)),
            ("check --order 2", *measured("check", f, x, order=2)),
            ("jacobian of sum(f)", *measured("jacobian", scalar, x)),
            ("hessian of sum(f)", *measured("hessian", scalar, x, order=2)),
            ("hessian of sum(f) --mode fast", *measured("hessian", scalar, x, order=2,
                                                        mode="fast"))]
    start = time.perf_counter()
    for _ in range(20):
        np.asarray(f(tf.constant(x)))
    one = (time.perf_counter() - start) / 20
    print(f"n = {n}, one eager call of f: {one * 1e3:.2f} ms")
    print("| run | time | points evaluated | verdict |")
    print("|---|---|---|---|")
    for name, report, seconds, points in rows:
        print(f"| {name} | {seconds:.2f} s | {points} | {'ok' if report.ok else 'FAILED'} |")


if __name__ == "__main__":
    main()
