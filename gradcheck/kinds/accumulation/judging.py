"""Accumulated micro-batch gradients against the whole batch's: their mean equals it (a loss
that is a mean over its batch), is 1/K of it (a loss summed over its batch), or differs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gradcheck.kinds.strategy.judging import TOLERANCE, stacked


def judge_accumulation(whole: Sequence[np.ndarray | None],
                       parts: Sequence[Sequence[np.ndarray | None]], dtype: str
                       ) -> tuple[str, float, float]:
    """(state, relative error, the ratio ⟨mean, whole⟩/⟨whole, whole⟩) of the mean of the
    micro-batch gradients (their sum over K): "same", "sum" (1/K of the whole batch's) or
    "different"."""
    tolerance = TOLERANCE.get(dtype, 1e-4)
    w = stacked(whole, whole)
    mean = np.mean([stacked(part, whole) for part in parts], axis=0)
    norm = float(np.linalg.norm(w)) or 1e-300
    error = float(np.linalg.norm(mean - w)) / norm
    ratio = float(np.dot(mean, w)) / norm**2
    if error <= tolerance:
        return "same", error, ratio
    if float(np.linalg.norm(len(parts) * mean - w)) <= tolerance * norm:
        return "sum", error, ratio
    return "different", error, ratio
