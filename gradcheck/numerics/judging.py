"""Autodiff against finite differences: comparisons, doubt, negligibility (NumPy only)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcheck.numerics.differences import FiniteDifference, row_blocks
from gradcheck.numerics.tolerances import ERROR_ESTIMATE_SAFETY, Tolerance

# A finite-difference error estimate above this fraction of |J| makes a pass meaningless.
NOISY_FRACTION = 1e-2


def inconclusive(fd: FiniteDifference, tolerance: Tolerance) -> bool:
    """True when finite differences are too noisy to confirm anything: their error estimate
    is a sizeable fraction of the Jacobian itself."""
    jacobian = np.asarray(fd.jacobian)
    scale = max(float(np.max(jacobian, initial=0.0)), -float(np.min(jacobian, initial=0.0)))
    worst = float(np.max(fd.error_estimate, initial=0.0))
    return worst > max(NOISY_FRACTION * scale, tolerance.atol)


def _columns(blocks: tuple[np.ndarray, ...], in_size: int, columns: np.ndarray | None
             ) -> tuple[np.ndarray, ...]:
    """Blocks as (out, in) matrices, of all columns or of the listed ones."""
    matrices = tuple(np.asarray(b, dtype=np.float64).reshape(-1, in_size) for b in blocks)
    return matrices if columns is None else tuple(m[:, columns] for m in matrices)


def _listed(found: np.ndarray, columns: np.ndarray | None) -> np.ndarray:
    return found if columns is None else np.asarray(columns, dtype=np.int64)[found]


def noisy_columns(fd: FiniteDifference, tolerance: Tolerance, in_size: int,
                  columns: np.ndarray | None = None) -> np.ndarray:
    """Flat input elements (of all, or of the listed columns) whose column's error estimate
    is a sizeable fraction of it."""
    jacobian, estimate = _columns((fd.jacobian, fd.error_estimate), in_size, columns)
    scale = np.maximum(np.max(jacobian, axis=0), -np.min(jacobian, axis=0))
    if tolerance.resolution < NOISY_FRACTION:  # retry coarse columns too, against the block
        scale = np.minimum(NOISY_FRACTION * scale, tolerance.resolution * finite_scale(fd.jacobian))
    else:
        scale = NOISY_FRACTION * scale
    return _listed(np.flatnonzero(
        np.max(estimate, axis=0) > np.maximum(scale, tolerance.atol)), columns)


def finite_scale(expected: np.ndarray) -> float:
    """The largest finite |entry| (0 for none)."""
    finite = np.abs(np.asarray(expected)).astype(np.float64, copy=False)  # complex too
    return float(np.max(finite[np.isfinite(finite)], initial=0.0))


def _allowed(expected: np.ndarray, tolerance: Tolerance,
             error_estimate: np.ndarray | float, scale: float = 0.0) -> np.ndarray:
    """atol + rtol*|expected| + scale_rtol*scale + safety*error_estimate, as a new array (in
    one buffer: blocks of full mode have millions of elements)."""
    allowed = np.asarray(np.abs(expected))
    estimate = np.asarray(error_estimate, dtype=np.float64)
    if estimate.ndim or float(estimate) != 0.0:
        allowed *= tolerance.rtol / ERROR_ESTIMATE_SAFETY
        allowed += estimate
        allowed *= ERROR_ESTIMATE_SAFETY
    else:
        allowed *= tolerance.rtol
    allowed += tolerance.atol + tolerance.scale_rtol * scale
    return allowed


def differ_beyond(a: np.ndarray, b: np.ndarray, allowed: float) -> np.ndarray:
    """Where two arrays of one shape differ by more than `allowed` (the same infinity, or
    NaN in both, is no difference)."""
    with np.errstate(invalid="ignore"):
        close = np.abs(a - b) <= allowed
    return ~(close | (a == b) | (np.isnan(a) & np.isnan(b)))


def _abs_difference(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    difference = np.asarray(np.subtract(actual, expected))  # 0-d stays an array
    return np.abs(difference, out=difference)


def in_doubt(autodiff: np.ndarray, fd: FiniteDifference, tolerance: Tolerance,
             in_size: int, columns: np.ndarray | None = None) -> np.ndarray:
    """Flat input elements (of all, or of the listed columns) whose column does not already
    agree with autodiff within tolerance.

    An element that agrees with plain central differences d1 within atol + rtol*|d1| plus its
    rounding allowance also passes `compare` against the extrapolated value e: |e - d1| is
    |d1 - d2|/3, below the ERROR_ESTIMATE_SAFETY * |d1 - d2| that the allowance then adds.
    Refining only the other elements therefore changes no verdict.
    """
    block, jacobian, estimate = _columns((autodiff, fd.jacobian, fd.error_estimate), in_size,
                                         columns)
    scale = finite_scale(fd.jacobian) if tolerance.scale_rtol else 0.0
    doubt = np.zeros(jacobian.shape[1], dtype=bool)
    for rows in row_blocks(*jacobian.shape):
        agrees = _abs_difference(block[rows], jacobian[rows]) <= _allowed(
            jacobian[rows], tolerance, estimate[rows], scale)
        doubt |= ~np.all(agrees, axis=0)
    return _listed(np.flatnonzero(doubt), columns)


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
    if expected.size:
        scale = max(float(np.max(expected)), -float(np.min(expected)))
        if 0.0 < scale < np.inf:
            return scale
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
    estimate = np.asarray(error_estimate, dtype=np.float64)
    scale = block_scale(expected, actual)
    shape = np.broadcast_shapes(actual.shape, expected.shape)
    size = int(np.prod(shape, dtype=np.int64))
    worst, n_bad, largest, max_abs = None, 0, 0.0, 0.0
    if size:
        excess = _Excess(_flat(actual, shape), _flat(expected, shape),
                         _flat(estimate, shape) if estimate.ndim else None,
                         None if ignore is None else _flat(np.asarray(ignore), shape),
                         estimate, tolerance, scale if tolerance.scale_rtol else 0.0)
        flat, largest, n_bad, max_abs = excess.over(size)
        n_bad = n_bad if largest > 1.0 else 0
        worst = tuple(int(i) for i in np.unravel_index(flat, shape))
    return Comparison(
        ok=n_bad == 0,
        max_abs_err=max_abs,
        max_rel_err=(max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))),
        worst_index=worst,
        n_bad=n_bad,
        size=size,
        max_error_estimate=float(np.max(estimate)) if size and estimate.size else 0.0,
        excess=largest,
    )


def _flat(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return (array if array.shape == shape else np.broadcast_to(array, shape)).reshape(-1)


@dataclass(frozen=True)
class _Excess:
    """`compare`'s error over allowance on flat arrays, a block of elements at a time (the
    arithmetic of whole arrays, kept in the cache: full mode's blocks have millions)."""

    actual: np.ndarray
    expected: np.ndarray
    estimates: np.ndarray | None  # per element, else `estimate` for all
    ignore: np.ndarray | None
    estimate: np.ndarray
    tolerance: Tolerance
    scale: float

    def over(self, size: int) -> tuple[int, float, int, float]:
        """The flat index and value of the largest excess (its first), how many exceed 1,
        and the largest |actual - expected| (NaN when one is)."""
        worst, largest, n_bad, maxima = 0, -np.inf, 0, []
        for part in row_blocks(size, 1):
            abs_err, excess = self.block(part)
            at = int(np.argmax(excess))
            if excess[at] > largest:
                worst, largest = part.start + at, float(excess[at])
            n_bad += int(np.count_nonzero(excess > 1.0))
            maxima.append(np.max(abs_err))
        return worst, largest, n_bad, float(np.max(maxima))

    def block(self, part: slice) -> tuple[np.ndarray, np.ndarray]:
        actual, expected = self.actual[part], self.expected[part]
        abs_err = _abs_difference(actual, expected)
        excess = _allowed(expected, self.tolerance, self.estimate if self.estimates is None
                          else self.estimates[part], self.scale)
        with np.errstate(invalid="ignore", divide="ignore"):
            np.divide(abs_err, excess, out=excess)
        if self.ignore is not None:
            excess[self.ignore[part]] = 0.0
            abs_err[self.ignore[part]] = 0.0
        if not np.all(np.isfinite(excess)):
            excess[abs_err == 0.0] = 0.0  # over an allowance of 0 or NaN: still a match
            # NaN or inf in either side is never a match (NaN > 1 would be False).
            abs_err[~np.isfinite(actual) & (excess != 0.0)] = np.inf
            excess[~np.isfinite(excess)] = np.inf
        return abs_err, excess


def allowed_errors(actual: np.ndarray, expected: np.ndarray, tolerance: Tolerance,
                   error_estimate: np.ndarray | float = 0.0) -> np.ndarray:
    """The error `compare` allows each element."""
    expected = np.asarray(expected, dtype=np.float64)
    scale = block_scale(expected, np.asarray(actual, dtype=np.float64)) \
        if tolerance.scale_rtol else 0.0
    return _allowed(expected, tolerance, error_estimate, scale)


def contract(upstream: np.ndarray, jacobian: np.ndarray) -> np.ndarray:
    """uᵀJ for a block of shape out + in and an upstream of shape out."""
    u = np.asarray(upstream, dtype=np.float64).reshape(-1)
    in_shape = jacobian.shape[upstream.ndim :]
    return (u @ np.asarray(jacobian, dtype=np.float64).reshape(u.size, -1)).reshape(in_shape)


def is_negligible(block: np.ndarray, error_estimate: np.ndarray, tolerance: Tolerance) -> bool:
    """True when an FD block is zero within its own error: no dependence detected."""
    allowed = tolerance.atol + ERROR_ESTIMATE_SAFETY * np.asarray(error_estimate)
    return bool(np.all(np.abs(block) <= allowed))
