"""A TARGET's values and VJP against another's at the same point: equal up to the rounding of
another op order (a saved graph against eager code), or where they first differ."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# Relative to the original's norm: a SavedModel runs the same ops as a graph, which may fuse and
# reorder float additions, nothing more.
TOLERANCE = {"float64": 1e-9, "float32": 1e-4}


def relative_error(found: np.ndarray, expected: np.ndarray) -> float:
    norm = float(np.linalg.norm(expected))
    gap = float(np.linalg.norm(found - expected))
    return gap / norm if norm else gap


def judge_against(values: tuple[Sequence[np.ndarray], Sequence[np.ndarray]],
                  gradients: tuple[Sequence[np.ndarray | None], Sequence[np.ndarray | None]],
                  dtype: str) -> tuple[str, float, float, int | None]:
    """(state, value error, gradient error, index of the worst source) for (TARGET's,
    original's) values and gradients per source: same, outputs, values, missing, gradient."""
    tolerance = TOLERANCE.get(dtype, 1e-4)
    found, expected = values
    if [v.shape for v in found] != [v.shape for v in expected]:
        return "outputs", float("inf"), float("inf"), None
    value_error = max((relative_error(f, e) for f, e in zip(found, expected)), default=0.0)
    worst, gradient_error, missing = None, 0.0, None
    for index, (mine, theirs) in enumerate(zip(*gradients)):
        if theirs is None:
            continue
        if mine is None:
            missing = index if missing is None else missing
            continue
        error = relative_error(mine, theirs) if mine.shape == theirs.shape else float("inf")
        if error > gradient_error:
            worst, gradient_error = index, error
    if value_error > tolerance:
        return "values", value_error, gradient_error, worst
    if missing is not None:
        return "missing", value_error, gradient_error, missing
    if gradient_error > tolerance:
        return "gradient", value_error, gradient_error, worst
    return "same", value_error, gradient_error, worst
