"""Per-weight gradient norms and zero fractions over training steps, judged (NumPy only)."""

from __future__ import annotations

from typing import Any

import numpy as np

# A weight whose gradient norm stays below this fraction of the largest weight's is vanishing;
# one whose last norm is this many times its earlier median is exploding; one with at least
# this fraction of exactly-zero gradient elements in every step is dead (ReLU units that never
# fire give their kernel columns and biases exact zeros).
VANISHING = 1e-6
EXPLODING = 1e3
DEAD = 0.5


def judge_health(norms: np.ndarray, zeros: np.ndarray) -> list[tuple[str, dict[str, Any]]]:
    """(state, figures) per weight from (steps, weights) arrays of norms and zero fractions
    (figures: GradientHealth's fields, the steps judged among them)."""
    norms = np.asarray(norms, np.float64)
    zeros = np.asarray(zeros, np.float64)
    # The failing step's non-finite gradient is the non-finite check's finding: the health of
    # the weights is judged on the steps that led to it.
    finite_rows = np.all(np.isfinite(norms), axis=1)
    if finite_rows.any():
        norms, zeros = norms[finite_rows], zeros[finite_rows]
    steps = norms.shape[0]
    finite = np.where(np.isfinite(norms), norms, np.nan)
    median = np.nanmedian(finite, axis=0) if steps else np.zeros(norms.shape[1])
    largest = float(np.nanmax(median)) if np.any(np.isfinite(median)) else 0.0
    judged: list[tuple[str, dict[str, Any]]] = []
    for index in range(norms.shape[1]):
        last = float(norms[-1, index]) if steps else 0.0
        earlier = finite[:-1, index]
        before = float(np.nanmedian(earlier)) if np.any(np.isfinite(earlier)) else np.nan
        growth = last / before if before and np.isfinite(before) and before > 0 else 1.0
        zero_fraction = float(np.min(zeros[:, index])) if steps else 0.0
        figures = {"steps": steps, "last_norm": last, "median_norm": float(median[index]),
                   "largest_norm": largest, "zero_fraction": zero_fraction,
                   "growth": float(growth)}
        if not np.isfinite(last) or (steps > 2 and growth > EXPLODING):
            state = "exploding"
        elif zero_fraction >= DEAD:
            state = "dead"
        elif largest > 0 and median[index] < VANISHING * largest:
            state = "vanishing"
        else:
            state = "healthy"
        judged.append((state, figures))
    return judged

