"""Central differences with lazy Richardson extrapolation and error estimates (NumPy only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.numerics.tolerances import ERROR_ESTIMATE_SAFETY, machine_eps

# The second difference f(x+h) - 2f(x) + f(x-h) grows like h^2 where f is smooth (x4 when h
# doubles) but like h at a kink (x2) and not at all at a jump (x1).
KINK_RATIO = 3.0
# Below this ratio of the second differences at 2h and at h, f jumps within the step (a kink at
# distance d < h from x gives (2h - d) / (h - d) >= 2, a jump 1, sqrt's infinite slope at 0,
# which is continuous, sqrt(2)).
JUMP_RATIO = 1.2
# A projection's discrepancy within this factor of the differences' own inconsistency (see
# `crossed_kink`) is blamed on a kink the step crossed, and smaller steps are tried.
KINK_FACTOR = 10.0
# Retries with steps each divisor times smaller than the default. Full mode retries the columns
# still in doubt, where f may vary faster than the default step (an oscillation at x = 1e6):
# three octaves deep. A projection retries only after `crossed_kink`, to step inside a kink
# near x; each retry moves every input element (four evaluations of f at full size, at every
# level of narrowing down), so two shallower ones.
SMALLER_STEPS = (8.0, 64.0, 512.0)
PROJECTION_SMALLER_STEPS = (4.0, 16.0)


def step_sizes(x: np.ndarray, dtype: str, eps: float | None = None) -> np.ndarray:
    """A central-difference step per element: eps^(1/3) scaled by the element's magnitude."""
    base = machine_eps(dtype) ** (1.0 / 3.0) if eps is None else eps
    x64 = np.asarray(x, dtype=np.float64)
    h = base * np.maximum(np.abs(x64), 1.0)
    # Make x + h exactly representable so that the step really taken is h.
    return np.asarray((x64 + h) - x64, dtype=np.float64)


STEP_FACTORS = (1.0, -1.0, 2.0, -2.0)
FIRST_FACTORS = STEP_FACTORS[:2]
SECOND_FACTORS = STEP_FACTORS[2:]


def perturbed_points(x: np.ndarray, h: np.ndarray, start: int, stop: int,
                     factors: tuple[float, ...] = STEP_FACTORS) -> np.ndarray:
    """Points (4k, *shape) for elements start..stop: x+h, x-h, x+2h, x-2h along each."""
    return points_along(x, h, np.arange(start, stop), factors)


def points_along(x: np.ndarray, h: np.ndarray, elements: np.ndarray,
                 factors: tuple[float, ...] = STEP_FACTORS) -> np.ndarray:
    """Points (len(factors)*k, *shape): x + factor*h along each listed flat element, in turn."""
    flat_x = np.asarray(x, dtype=np.float64).reshape(-1)
    flat_h = h.reshape(-1)
    index = np.asarray(elements, dtype=np.int64)
    count = index.size
    points = np.tile(flat_x, (count, len(factors), 1))
    for k, factor in enumerate(factors):
        points[np.arange(count), k, index] += factor * flat_h[index]
    return points.reshape((len(factors) * count, *np.shape(x)))


@dataclass(frozen=True)
class FiniteDifference:
    """The FD Jacobian of one output with respect to one input, shape out + in."""

    jacobian: np.ndarray
    error_estimate: np.ndarray
    kink: np.ndarray  # bool, per element: a kink inside [x - 2h, x + 2h]
    # bool, per element: of those, a jump (f itself discontinuous, as across a branch cut)
    jump: np.ndarray | None = None


# Values at x ± h may be inf or NaN: the checks judge them; NumPy's warnings would reach the
# user's stderr.
@np.errstate(invalid="ignore", over="ignore", divide="ignore")
def central_quotient(plus: Any, minus: Any, step: Any) -> Any:
    """(f(x + h) - f(x - h)) / 2h, elementwise."""
    difference = np.subtract(plus, minus)
    difference /= 2.0 * step
    return difference


def rounding_error(eps: float, step: Any, *values: Any) -> Any:
    """What rounding can put into a difference quotient of these values: eps * sum|v| / step
    (in place: the values of full mode have millions of elements)."""
    total = np.abs(values[0])
    for value in values[1:]:
        total += np.abs(value)
    total *= eps
    total /= step
    return total


def richardson_step(d1: Any, d2: Any) -> Any:
    """Richardson's (4 D(h) - D(2h)) / 3 from central quotients with steps h and 2h."""
    return (4.0 * d1 - d2) / 3.0


def extrapolate(d1: Any, d2: Any, rounding: Any) -> tuple[Any, Any]:
    """`richardson_step` and its error estimate: |D(h) - D(2h)| (the truncation of D(h)) plus
    `rounding`."""
    return richardson_step(d1, d2), np.abs(d1 - d2) + rounding


@np.errstate(invalid="ignore", over="ignore", divide="ignore")
def second_difference(plus: Any, centre: Any, minus: Any) -> Any:
    """|f(x + h) - 2 f(x) + f(x - h)|: O(h²) where f is smooth, the slope's jump times h at a
    kink between x - h and x + h."""
    return np.abs(plus - 2.0 * centre + minus)


def crossed_kink(error: float, inconsistency: float) -> bool:
    """Whether a projection's discrepancy may be the step crossing a kink: it is not beyond
    KINK_FACTOR times how far the differences disagree with themselves beyond rounding (NaN
    is not beyond)."""
    return not error > KINK_FACTOR * inconsistency


@np.errstate(invalid="ignore", over="ignore", divide="ignore")
def _richardson(plus1: np.ndarray, minus1: np.ndarray, plus2: np.ndarray, minus2: np.ndarray,
                f0: np.ndarray, step: np.ndarray, eps: float
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Extrapolated derivative, its error estimate, kink and jump flags, all (k, m)."""
    d1 = central_quotient(plus1, minus1, step)
    extrapolated, estimate = extrapolate(
        d1, central_quotient(plus2, minus2, 2.0 * step),
        rounding_error(eps, step, plus1, minus1, plus2, minus2))
    kink = kinks(plus1, minus1, plus2, minus2, f0, d1, step, eps)
    return extrapolated, estimate, kink, kink & jumps(plus1, minus1, plus2, minus2, f0)


def kinks(plus1: np.ndarray, minus1: np.ndarray, plus2: np.ndarray, minus2: np.ndarray,
          f0: np.ndarray, d1: np.ndarray, step: np.ndarray, eps: float) -> np.ndarray:
    """Where the values at x ± h and x ± 2h show a kink between x - h and x + h: a second
    difference above rounding and the slope, which does not grow fourfold at twice the step."""
    jump1 = second_difference(plus1, f0, minus1)
    jump2 = second_difference(plus2, f0, minus2)
    noise = 100.0 * eps * (np.abs(plus1) + np.abs(minus1) + 2.0 * np.abs(f0))
    significant = (jump1 > noise) & (jump1 / step > 1e-3 * (np.abs(d1) + 1e-3))
    return np.asarray(significant & (jump2 < KINK_RATIO * jump1))


@np.errstate(invalid="ignore", over="ignore", divide="ignore")
def jumps(plus1: np.ndarray, minus1: np.ndarray, plus2: np.ndarray, minus2: np.ndarray,
          f0: np.ndarray) -> np.ndarray:
    """Of the kinks, those where f itself jumps: the second difference does not grow with the
    step (call only with `kinks`, which has ruled out rounding)."""
    jump1 = second_difference(plus1, f0, minus1)
    return np.asarray(second_difference(plus2, f0, minus2) < JUMP_RATIO * jump1)


# A crossed kink shows in autodiff along the step as a jump no smooth derivative has: what a
# quadratic in the move leaves unexplained is at least this share of the disagreement it
# explains (a step of height J leaves about J/4 at the points used; a smooth derivative, its
# rounding).
KINK_RESIDUAL_SHARE = 0.1
# Or a line with one step in it fits autodiff this many times closer than any quadratic: the
# derivative of a ReLU network's squared error is piecewise linear, and a float16 step wide
# enough to rise above rounding crosses other samples' kinks.
STEP_FIT_RATIO = 3.0


def crossed_kink_between(moves: np.ndarray, derivatives: np.ndarray, centre: float,
                         difference: float, allowed: float) -> bool:
    """Whether a difference quotient that disagrees with autodiff's `centre` value at x is what
    a correct derivative gives across a kink inside the step. Autodiff at x + moves must jump
    (depart from any quadratic in the move by more than rounding and a share of the
    disagreement), and the quotient, a mean of the derivative over its interval, must lie
    within the range autodiff spans there. A derivative that merely curves leaves the
    disagreement standing."""
    positions = np.append(np.asarray(moves, dtype=np.float64), 0.0)
    values = np.append(np.asarray(derivatives, dtype=np.float64), centre)
    if not (np.all(np.isfinite(values)) and np.isfinite(difference)) or positions.size < 4:
        return False
    scale = float(np.max(np.abs(positions))) or 1.0
    fitted = np.polyval(np.polyfit(positions / scale, values, 2), positions / scale)
    unexplained = float(np.max(np.abs(values - fitted)))
    # Richardson's (4 D(h) - D(2h)) / 3 of two such means lies within that range widened by a
    # third of its width on each side.
    low, high = float(values.min()), float(values.max())
    margin = (high - low) / 3.0 + allowed
    within = low - margin <= difference <= high + margin
    floor = KINK_RESIDUAL_SHARE * abs(difference - centre)
    stepped = (STEP_FIT_RATIO * _step_fit_residual(positions / scale, values) < unexplained
               and unexplained > max(allowed / 2.0, floor))
    return bool(within and (unexplained > max(allowed, floor) or stepped))


def _step_fit_residual(positions: np.ndarray, values: np.ndarray) -> float:
    """How far the closest line with one step between neighbouring positions leaves the
    values (largest residual of the least-squares fit)."""
    order = np.argsort(positions)
    x, y = positions[order], values[order]
    best = np.inf
    for start in range(1, x.size):
        design = np.stack([np.ones_like(x), x, (np.arange(x.size) >= start).astype(float)], 1)
        coefficients = np.linalg.lstsq(design, y, rcond=None)[0]
        best = min(best, float(np.max(np.abs(design @ coefficients - y))))
    return best


# Elements per array that one pass of a blocked loop works on: its arrays stay in the cache.
BLOCK_ELEMENTS = 1 << 15


def row_blocks(rows: int, columns: int) -> list[slice]:
    """Consecutive rows of a (rows, columns) array, about BLOCK_ELEMENTS elements at a time."""
    step = max(1, BLOCK_ELEMENTS // max(columns, 1))
    return [slice(start, start + step) for start in range(0, rows, step)]


def to_block(a: np.ndarray, out_shape: tuple[int, ...], in_shape: tuple[int, ...]) -> np.ndarray:
    """(n_in, n_out) -> out_shape + in_shape, laid out in memory as the autodiff blocks are
    (the judging's elementwise passes over mixed layouts run at half speed)."""
    return np.ascontiguousarray(a.T).reshape(out_shape + in_shape)


def finite_difference(
    evaluations: np.ndarray,
    centre: np.ndarray,
    h: np.ndarray,
    output_dtype: str,
) -> FiniteDifference:
    """Richardson-extrapolated central differences from the 4n evaluations of one output.

    `evaluations` has shape (4n, *out) in the order of `perturbed_points`.
    """
    n = h.size
    values = np.asarray(evaluations, dtype=np.float64).reshape((n, 4, -1))
    f0 = np.asarray(centre, dtype=np.float64).reshape(1, -1)
    extrapolated, estimate, kink, jump = _richardson(
        values[:, 0], values[:, 1], values[:, 2], values[:, 3], f0, h.reshape(-1)[:, None],
        machine_eps(output_dtype))
    shapes = (np.shape(centre), h.shape)
    return FiniteDifference(jacobian=to_block(extrapolated, *shapes),
                            error_estimate=to_block(estimate, *shapes),
                            kink=to_block(kink, *shapes), jump=to_block(jump, *shapes))


def central_difference(
    evaluations: np.ndarray,
    centre: np.ndarray,
    h: np.ndarray,
    output_dtype: str,
) -> FiniteDifference:
    """Plain central differences from the 2n evaluations x+h, x-h (order of `points_along`).

    The error estimate covers rounding only: truncation is unknown until `refine` adds x±2h.
    """
    n = h.size
    values = np.asarray(evaluations, dtype=np.float64).reshape((n, 2, -1))
    steps, eps = h.reshape(-1)[:, None], machine_eps(output_dtype)
    # Written straight into the blocks' (out, in) layout, a few input elements at a time: the
    # same arithmetic as whole arrays, without their temporaries and transposes.
    jacobian, rounding = np.empty(values.shape[2:] + (n,)), np.empty(values.shape[2:] + (n,))
    for rows in row_blocks(n, values.shape[2]):
        plus, minus, step = values[rows, 0], values[rows, 1], steps[rows]
        jacobian[:, rows] = central_quotient(plus, minus, step).T
        rounding[:, rows] = rounding_error(eps, step, plus, minus).T
    shape = np.shape(centre) + h.shape
    return FiniteDifference(jacobian=jacobian.reshape(shape),
                            error_estimate=rounding.reshape(shape),
                            kink=np.zeros(shape, dtype=bool))


def refine(
    fd: FiniteDifference,
    first: np.ndarray,
    second: np.ndarray,
    centre: np.ndarray,
    h: np.ndarray,
    elements: np.ndarray,
    output_dtype: str,
) -> FiniteDifference:
    """Richardson extrapolation for the listed input elements, given their x±2h evaluations.

    `first` holds all 2n evaluations x±h; `second` the 2k evaluations x±2h of `elements`.
    """
    index = np.asarray(elements, dtype=np.int64)
    if index.size == 0:
        return fd
    n, m = h.size, int(np.prod(np.shape(centre), dtype=np.int64))
    ones = np.asarray(first, dtype=np.float64).reshape((n, 2, m))[index]
    twos = np.asarray(second, dtype=np.float64).reshape((index.size, 2, m))
    f0 = np.asarray(centre, dtype=np.float64).reshape(1, -1)
    extrapolated, estimate, kink, jump = _richardson(
        ones[:, 0], ones[:, 1], twos[:, 0], twos[:, 1], f0, h.reshape(-1)[index][:, None],
        machine_eps(output_dtype))
    return replaced_where(fd, (extrapolated, estimate, kink, jump), index,
                     np.ones(index.size, dtype=bool), n)


def with_smaller_steps(
    fd: FiniteDifference,
    first: np.ndarray,
    second: np.ndarray,
    centre: np.ndarray,
    h_small: np.ndarray,
    elements: np.ndarray,
    output_dtype: str,
) -> FiniteDifference:
    """Recompute the listed columns with steps h_small; keep each where its error estimate
    is smaller. The default step scales with |x|, too coarse where f oscillates faster."""
    index = np.asarray(elements, dtype=np.int64)
    if index.size == 0:
        return fd
    m = int(np.prod(np.shape(centre), dtype=np.int64))
    ones = np.asarray(first, dtype=np.float64).reshape((index.size, 2, m))
    twos = np.asarray(second, dtype=np.float64).reshape((index.size, 2, m))
    f0 = np.asarray(centre, dtype=np.float64).reshape(1, -1)
    columns = _richardson(
        ones[:, 0], ones[:, 1], twos[:, 0], twos[:, 1], f0, h_small.reshape(-1)[index][:, None],
        machine_eps(output_dtype))
    return keep_better(fd, *columns, index, h_small.size)


# How far the largest of a few samples of f's rounding noise may understate it: a reloaded
# LSTM's tiny output, eight directions against sixty-four, 3.4 times (tensorflow#57343's
# question, where smaller steps then replaced an accurate difference with a noisy one).
NOISE_UNDERSTATEMENT = 4.0


def keep_better(fd: FiniteDifference, extrapolated: np.ndarray, estimate: np.ndarray,
                kink: np.ndarray, jump: np.ndarray, elements: np.ndarray, in_size: int
                ) -> FiniteDifference:
    """Columns (k, m) recomputed with other steps replace the listed ones of fd where their
    error estimate is smaller, or where the two disagree beyond both estimates."""
    index = np.asarray(elements, dtype=np.int64)
    m, n = extrapolated.shape[1], in_size
    old_estimate = np.asarray(fd.error_estimate).reshape(m, n)[:, index].T
    old_value = np.asarray(fd.jacobian).reshape(m, n)[:, index].T
    # Smaller steps win when they are more certain, or when the two disagree beyond both
    # estimates: then the coarse estimate was fooled (f oscillating on the scale of the step).
    # Rounding dominates the smaller steps' estimate, and f's noise, measured as the largest
    # of a few samples, may be understated: the disagreement must exceed that too.
    inconsistent = np.abs(extrapolated - old_value) > ERROR_ESTIMATE_SAFETY * (
        NOISE_UNDERSTATEMENT * estimate + old_estimate)
    unusable = ~np.all(np.isfinite(old_value) & np.isfinite(old_estimate), axis=1)
    better = (np.max(estimate, axis=1) < np.max(old_estimate, axis=1)) | np.any(
        inconsistent, axis=1) | unusable
    better &= np.all(np.isfinite(extrapolated) & np.isfinite(estimate), axis=1)
    return replaced_where(fd, (extrapolated, estimate, kink, jump), index, better, n)


def replaced_where(fd: FiniteDifference, columns: tuple[np.ndarray, ...], index: np.ndarray,
              chosen: np.ndarray, in_size: int) -> FiniteDifference:
    """fd whose listed columns are replaced, where chosen, by the new ones (each (k, m))."""
    m = columns[0].shape[1]
    jump = np.zeros(np.shape(fd.kink), dtype=bool) if fd.jump is None else fd.jump
    blocks = []
    for old, new in zip((fd.jacobian, fd.error_estimate, fd.kink, jump), columns, strict=True):
        flat = np.array(old).reshape(m, in_size)
        flat[:, index[chosen]] = new[chosen].T
        blocks.append(flat.reshape(np.shape(old)))
    return FiniteDifference(*blocks)


def relative_divisor(x: np.ndarray) -> np.ndarray:
    """Divides the default step (relative to max(|x|, 1)) down to one relative to |x|
    itself: the last retry, for tiny x where the default crosses zero (log, sqrt)."""
    magnitude = np.abs(np.asarray(x, dtype=np.float64))
    return np.where(magnitude > 0, 1.0 / np.clip(magnitude, 1e-8, 1.0), 1.0)
