"""The gradient a distributed step applies against the single-device one: equal, N times too
large (a per-replica mean), regularisation counted once per replica, or otherwise different."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# Relative to the single-device gradient's norm: summing N replicas' gradients instead of one
# batch's reorders float additions, nothing more.
TOLERANCE = {"float64": 1e-9, "float32": 1e-4}


def stacked(arrays: Sequence[np.ndarray | None], like: Sequence[np.ndarray | None]
             ) -> np.ndarray:
    """The arrays where `like` has one, flattened into one vector (a missing one as zeros)."""
    return np.concatenate([np.ravel(a if a is not None else np.zeros_like(ref))
                           for a, ref in zip(arrays, like) if ref is not None] or [np.zeros(0)])


def judge_replicas(whole: Sequence[np.ndarray | None], summed: Sequence[np.ndarray | None],
                   replicas: int, dtype: str,
                   regularisation: Sequence[np.ndarray | None] | None = None
                   ) -> tuple[str, float, float]:
    """(state, relative error, the ratio ⟨summed, whole⟩/⟨whole, whole⟩): state is "same",
    "mean" (N times the gradient), "regularisation" (the model's losses counted N times) or
    "different"."""
    tolerance = TOLERANCE.get(dtype, 1e-4)
    w, s = stacked(whole, whole), stacked(summed, whole)
    norm = float(np.linalg.norm(w)) or 1e-300
    error = float(np.linalg.norm(s - w)) / norm
    ratio = float(np.dot(s, w)) / norm**2
    if error <= tolerance:
        return "same", error, ratio
    if float(np.linalg.norm(s - replicas * w)) <= tolerance * replicas * norm:
        return "mean", error, ratio
    if regularisation is not None:
        r = stacked(regularisation, whole)
        if float(np.linalg.norm(s - w - (replicas - 1) * r)) <= tolerance * replicas * norm:
            return "regularisation", error, ratio
    return "different", error, ratio
