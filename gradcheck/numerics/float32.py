"""Finite differences pushed to float32's limit (NumPy only).

Where f computes in float32 its values carry rounding noise of a few ulps, which a central
difference divides by its step. Three things make the error estimate, not a fixed rtol floor,
decide the verdict there:

- a larger step (2^-6 of max(|x|, 1), not eps^(1/3)), with Richardson extrapolation over
  h, 2h and 4h: the difference between the extrapolants of (h, 2h) and (2h, 4h) estimates the
  truncation error, and retries with smaller steps keep whichever estimate is smaller;
- the step actually taken: x ± c·h is rounded to float32 before f sees it, so every
  difference quotient divides by the realised width fl(x + c·h) - fl(x - c·h) (exact in
  float64), not by 2c·h;
- f's rounding noise measured per output element, from second differences along a few random
  directions a few ulps long (where truncation is nil), rather than assumed to be one ulp.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcheck.numerics.differences import (
    FiniteDifference,
    jumps,
    kinks,
    richardson_step,
    to_block,
)

MACHINE_EPS = float(np.finfo(np.float32).eps)
BASE_STEP = 2.0**-6
FACTORS = (1.0, -1.0, 2.0, -2.0, 4.0, -4.0)
# Retries for columns in doubt: each divisor times smaller steps.
SMALLER_STEPS = (4.0, 32.0, 256.0)
# Eight: the largest of four understated an LSTM's rounding fivefold (a reloaded SavedModel's
# recurrent kernel, tensorflow/tensorflow#57343's question), a false alarm.
NOISE_DIRECTIONS = 8
NOISE_ULPS = 4
# The noise measured next to x is scaled to the values at x ± c·h by at most this factor.
NOISE_GROWTH = 4.0
# The extrapolants of (h, 2h) and (2h, 4h) differ by 15 times the truncation error where the
# expansion in h holds; dividing by 3 keeps the estimate valid while that error merely grows
# faster than (step)^1.6 (the verdict allows ERROR_ESTIMATE_SAFETY estimates).
TRUNCATION_DIVISOR = 3.0


def applies(dtype: str) -> bool:
    """Whether finite differences of f computing in `dtype` take this path."""
    return dtype == "float32"


def rounded(values: np.ndarray) -> np.ndarray:
    """float64 values rounded to the nearest float32 (what a float32 f sees)."""
    return np.asarray(np.asarray(values, dtype=np.float64).astype(np.float32), dtype=np.float64)


def step_sizes(x: np.ndarray, eps: float | None = None) -> np.ndarray:
    """A step per element, 2^-6 of max(|x|, 1) (or `eps` of it), with x + h a float32."""
    base = BASE_STEP if eps is None else eps
    x64 = np.asarray(x, dtype=np.float64)
    h = base * np.maximum(np.abs(x64), 1.0)
    realised = rounded(x64 + h) - x64
    return np.where(realised > 0, realised, h)


def noise_points(x: np.ndarray, seed: int = 0) -> np.ndarray:
    """(2k, *shape): x ± d for k random directions d, each element moved 1..NOISE_ULPS ulps."""
    x32 = np.asarray(x, dtype=np.float32)
    ulp = np.spacing(np.abs(x32)).astype(np.float64)
    rng = np.random.default_rng(seed)
    points = []
    for _ in range(NOISE_DIRECTIONS):
        d = rng.choice([-1.0, 1.0], size=x32.shape) * rng.integers(1, NOISE_ULPS + 1, x32.shape)
        points += [rounded(x32 + d * ulp), rounded(x32 - d * ulp)]
    return np.stack(points).reshape((2 * NOISE_DIRECTIONS, *np.shape(x)))


@np.errstate(invalid="ignore", over="ignore")  # inf - inf is NaN: left out below
def noise_level(evaluations: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """Per flat output element, a bound on the rounding error of one evaluation of f: the
    largest |f(x + d) + f(x - d) - 2 f(x)| / 2 over the directions (the curvature over a few
    ulps is nil, so what remains is noise)."""
    values = np.asarray(evaluations, dtype=np.float64).reshape((NOISE_DIRECTIONS, 2, -1))
    f0 = np.asarray(centre, dtype=np.float64).reshape(-1)
    second = np.abs(values[:, 0] + values[:, 1] - 2.0 * f0)
    return np.asarray(np.nanmax(np.where(np.isfinite(second), second, np.nan), axis=0,
                                initial=0.0) / 2.0)


@dataclass(frozen=True)
class Float32Steps:
    """What the float32 path needs besides the evaluations: x and f's measured noise."""

    x: np.ndarray  # the input's values, float64, its own shape
    noise: np.ndarray  # per flat output element


def widths(x: np.ndarray, h: np.ndarray, elements: np.ndarray) -> np.ndarray:
    """(k, 3): the realised widths fl(x + c·h) - fl(x - c·h) for c = 1, 2, 4."""
    flat_x = np.asarray(x, dtype=np.float64).reshape(-1)[elements]
    flat_h = np.asarray(h, dtype=np.float64).reshape(-1)[elements]
    return np.stack([rounded(flat_x + c * flat_h) - rounded(flat_x - c * flat_h)
                     for c in (1.0, 2.0, 4.0)], axis=1)


def _rounding(values: np.ndarray, f0: np.ndarray, noise: np.ndarray,
              width: np.ndarray) -> np.ndarray:
    """(k, m): a bound on the rounding part of the extrapolated derivative's error."""
    largest = np.max(np.abs(values[:, :4]), axis=1)
    growth = np.clip(largest / np.maximum(np.abs(f0), np.finfo(np.float64).tiny), 1.0,
                     NOISE_GROWTH)
    per_value = np.maximum(noise * growth, 0.5 * MACHINE_EPS * largest)  # noise: (1|k, m)
    # The rounding errors of the four values are independent: their root sum of squares,
    # with (4·D(h) - D(2h)) / 3 weighting f(x ± h) by 4/3 / w1 and f(x ± 2h) by 1/3 / w2.
    coefficient = np.sqrt(2.0 * (4.0 / 3.0 / width[:, 0]) ** 2
                          + 2.0 * (1.0 / 3.0 / width[:, 1]) ** 2)
    return per_value * coefficient[:, None]


@np.errstate(all="ignore")  # values at x ± c·h may overflow: non-finite ones are judged later
def richardson(values: np.ndarray, centre: np.ndarray, steps: Float32Steps, h: np.ndarray,
               elements: np.ndarray, noise: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Extrapolated derivative, error estimate, kink and jump flags (k, m) of the listed
    elements, from their evaluations (k, 6, m) at x ± h, x ± 2h, x ± 4h (the order of FACTORS);
    `noise` (k, m), when given, stands for the noise measured next to x."""
    index = np.asarray(elements, dtype=np.int64)
    width = widths(steps.x, h, index)
    f0 = np.asarray(centre, dtype=np.float64).reshape(1, -1)
    d = [(values[:, 2 * c] - values[:, 2 * c + 1]) / width[:, c, None] for c in range(3)]
    extrapolated, coarser = richardson_step(d[0], d[1]), richardson_step(d[1], d[2])
    # Where x ± 4h leaves f's domain, |D(h) - D(2h)| bounds the truncation instead.
    truncation = np.where(np.isfinite(coarser),
                          np.abs(extrapolated - coarser) / TRUNCATION_DIVISOR,
                          np.abs(d[0] - d[1]))
    noise = steps.noise[None, :] if noise is None else noise
    estimate = truncation + _rounding(values, f0, noise, width)
    plus1, minus1, plus2, minus2 = (values[:, k] for k in range(4))
    kink = kinks(plus1, minus1, plus2, minus2, f0, d[0], width[:, 0, None] / 2.0, MACHINE_EPS)
    return extrapolated, estimate, kink, kink & jumps(plus1, minus1, plus2, minus2, f0)


def finite_difference(evaluations: np.ndarray, centre: np.ndarray, h: np.ndarray,
                      steps: Float32Steps) -> FiniteDifference:
    """The block from the 6n evaluations of one output (order of `points_along` with FACTORS)."""
    n = h.size
    values = np.asarray(evaluations, dtype=np.float64).reshape((n, len(FACTORS), -1))
    columns = richardson(values, centre, steps, h, np.arange(n))
    shapes = (np.shape(centre), h.shape)
    return FiniteDifference(*(to_block(column, *shapes) for column in columns))


def columns(evaluations: np.ndarray, centre: np.ndarray, h: np.ndarray, steps: Float32Steps,
            elements: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Derivative, estimate, kinks and jumps (k, m) of the listed elements, from their 6k
    evaluations with steps h (for `differences.keep_better`)."""
    index = np.asarray(elements, dtype=np.int64)
    values = np.asarray(evaluations, dtype=np.float64).reshape((index.size, len(FACTORS), -1))
    return richardson(values, centre, steps, h, index)


# Quartic in the move: of the seven values f(x), f(x ± h), f(x ± 2h), f(x ± 4h), two degrees of
# freedom are left to rounding (and to f's fifth and higher derivatives, which count as error
# too); the noise bound is twice their root mean square.
STEP_NOISE_DEGREE = 4


def step_noise(values: np.ndarray, centre: np.ndarray, x: np.ndarray, h: np.ndarray,
               elements: np.ndarray) -> np.ndarray:
    """(k, m): f's rounding noise at the step's own scale, per listed element and output, from
    its evaluations (k, 6, m). A few ulps from x, most of f's intermediate roundings stay the
    same, so the noise measured there can understate what differs between x + h and x - h
    (a reloaded LSTM's tiny output: 1.8 times)."""
    index = np.asarray(elements, dtype=np.int64)
    flat_x = np.asarray(x, dtype=np.float64).reshape(-1)[index]
    flat_h = np.asarray(h, dtype=np.float64).reshape(-1)[index]
    moves = np.stack([rounded(flat_x + c * flat_h) - flat_x for c in FACTORS] +
                     [np.zeros_like(flat_x)], axis=1)
    f0 = np.broadcast_to(np.asarray(centre, dtype=np.float64).reshape(1, 1, -1),
                         (index.size, 1, values.shape[2]))
    points = np.concatenate([np.asarray(values, dtype=np.float64), f0], axis=1)
    noise = np.zeros((index.size, values.shape[2]))
    for row, move in enumerate(moves):
        scale = float(np.max(np.abs(move))) or 1.0
        design = np.vander(move / scale, STEP_NOISE_DEGREE + 1)
        fitted = design @ np.linalg.lstsq(design, points[row], rcond=None)[0]
        leftover = len(move) - STEP_NOISE_DEGREE - 1
        noise[row] = 2.0 * np.sqrt(np.sum((points[row] - fitted) ** 2, axis=0) / leftover)
    return noise
