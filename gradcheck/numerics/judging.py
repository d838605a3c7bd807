"""Autodiff against finite differences: comparisons, doubt, negligibility (NumPy only)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcheck.numerics.differences import FiniteDifference
from gradcheck.numerics.tolerances import ERROR_ESTIMATE_SAFETY, Tolerance

# A finite-difference error estimate above this fraction of |J| makes a pass meaningless.
NOISY_FRACTION = 1e-2


def inconclusive(fd: FiniteDifference, tolerance: Tolerance) -> bool:
    """True when finite differences are too noisy to confirm anything: their error estimate
    is a sizeable fraction of the Jacobian itself."""
    scale = float(np.max(np.abs(fd.jacobian), initial=0.0))
    worst = float(np.max(fd.error_estimate, initial=0.0))
    return worst > max(NOISY_FRACTION * scale, tolerance.atol)


def noisy_columns(fd: FiniteDifference, tolerance: Tolerance, in_size: int) -> np.ndarray:
    """Flat input elements whose column's error estimate is a sizeable fraction of it."""
    estimate = np.asarray(fd.error_estimate).reshape(-1, in_size)
    scale = np.max(np.abs(np.asarray(fd.jacobian).reshape(-1, in_size)), axis=0)
    return np.flatnonzero(
        np.max(estimate, axis=0) > np.maximum(NOISY_FRACTION * scale, tolerance.atol))


def in_doubt(autodiff: np.ndarray, fd: FiniteDifference, tolerance: Tolerance,
             in_size: int) -> np.ndarray:
    """Flat input elements whose column does not already agree with autodiff within tolerance.

    An element that agrees with plain central differences d1 within atol + rtol*|d1| plus its
    rounding allowance also passes `compare` against the extrapolated value e: |e - d1| is
    |d1 - d2|/3, below the ERROR_ESTIMATE_SAFETY * |d1 - d2| that the allowance then adds.
    Refining only the other elements therefore changes no verdict.
    """
    block = np.asarray(autodiff, dtype=np.float64)
    agrees = np.abs(block - fd.jacobian) <= (
        tolerance.atol + tolerance.rtol * np.abs(fd.jacobian)
        + ERROR_ESTIMATE_SAFETY * fd.error_estimate)
    return np.flatnonzero(~np.all(agrees.reshape(-1, in_size), axis=0))


@dataclass(frozen=True)
class Comparison:
    ok: bool
    max_abs_err: float
    # Relative to the block's scale (max |expected|), never elementwise on near-zero entries.
    max_rel_err: float
    worst_index: tuple[int, ...] | None
    n_bad: int
    size: int
    max_error_estimate: float
    # The largest |actual - expected| / allowed: the number that decides (> 1 fails).
    excess: float = 0.0


def block_scale(expected: np.ndarray, actual: np.ndarray) -> float:
    """What errors in a block are relative to: its largest reference entry (else autodiff's)."""
    finite = np.abs(expected[np.isfinite(expected)])
    scale = float(np.max(finite, initial=0.0))
    if scale == 0.0:
        scale = float(np.max(np.abs(actual[np.isfinite(actual)]), initial=0.0))
    return scale


def compare(
    actual: np.ndarray,
    expected: np.ndarray,
    tolerance: Tolerance,
    error_estimate: np.ndarray | float = 0.0,
    ignore: np.ndarray | None = None,
) -> Comparison:
    """Elementwise |actual - expected| <= atol + rtol*|expected| + safety*error_estimate."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    estimate = np.broadcast_to(np.asarray(error_estimate, dtype=np.float64), expected.shape)
    abs_err = np.abs(actual - expected)
    if not np.all(np.isfinite(actual)):
        abs_err = np.where(np.isfinite(actual), abs_err, np.inf)
    allowed = tolerance.atol + tolerance.rtol * np.abs(expected) + ERROR_ESTIMATE_SAFETY * estimate
    with np.errstate(invalid="ignore", divide="ignore"):
        excess = np.where(abs_err == 0, 0.0, abs_err / allowed)
    if ignore is not None:
        excess = np.where(ignore, 0.0, excess)
        abs_err = np.where(ignore, 0.0, abs_err)
    # NaN or inf in either side is never a match (NaN > 1 would be False).
    bad = (excess > 1.0) | ~np.isfinite(excess)
    worst = None
    if excess.size:
        ranked = np.where(np.isfinite(excess), excess, np.inf)
        worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(ranked)), excess.shape))
    max_abs = float(np.max(abs_err)) if abs_err.size else 0.0
    scale = block_scale(expected, actual)
    return Comparison(
        ok=not bool(np.any(bad)),
        max_abs_err=max_abs,
        max_rel_err=(max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))),
        worst_index=worst,
        n_bad=int(np.sum(bad)),
        size=int(excess.size),
        max_error_estimate=float(np.max(estimate)) if estimate.size else 0.0,
        excess=float(np.max(np.where(np.isfinite(excess), excess, np.inf))) if excess.size
        else 0.0,
    )


def contract(upstream: np.ndarray, jacobian: np.ndarray) -> np.ndarray:
    """uᵀJ for a block of shape out + in and an upstream of shape out."""
    u = np.asarray(upstream, dtype=np.float64).reshape(-1)
    in_shape = jacobian.shape[upstream.ndim :]
    return (u @ np.asarray(jacobian, dtype=np.float64).reshape(u.size, -1)).reshape(in_shape)


def is_negligible(block: np.ndarray, error_estimate: np.ndarray, tolerance: Tolerance) -> bool:
    """True when an FD block is zero within its own error: no dependence detected."""
    allowed = tolerance.atol + ERROR_ESTIMATE_SAFETY * np.asarray(error_estimate)
    return bool(np.all(np.abs(block) <= allowed))
