"""The rounding probe's numbers (NumPy only): whether f rounds a float64 argument to float32
inside, told by moving the argument less than float32 can resolve.

f is moved three times along one random direction: by TINY_MOVE (far below float32's
resolution, far above float64's), and by the two PROBE_STEPS that float32 resolves. When
the tiny move changes nothing, the two resolved moves say whether a float64 f would have
changed: a change in proportion to the move (first order: the longer move changes f about
twice as much) by more than float64's resolution, or steps that follow no power of the move
(float32's quantised values); not a change about four times as large (f is stationary along
the move, second order, its change below float64's resolution).
"""

from __future__ import annotations

import numpy as np

from gradcheck.numerics.tolerances import machine_eps

# f moved by this relative amount: far below float32's resolution, far above float64's.
TINY_MOVE = 1e-10
# Moves that float32 resolves; the second is twice the first.
PROBE_STEPS = (1e-4, 2e-4)
# The ratio of the two changes: about 2 in first order, about 4 in second order, with room
# for the curvature and rounding of a real f either side.
FIRST_ORDER_RATIO = (1.5, 2.7)
SECOND_ORDER_RATIO = (3.3, 4.7)
# float64's resolution of an output, in units of its machine epsilon times the output's size.
FLOAT64_RESOLUTION_ULPS = 4.0
# The probe's own random stream (the move is the same on every run).
ROUNDING_PROBE_SEED = 20_230_611


def probe_direction(rng: np.random.Generator, x: np.ndarray) -> np.ndarray:
    """Random signs and sizes: a fixed pattern can be orthogonal to the gradient (a symmetric
    point such as [1, 1] along [1, -1])."""
    return rng.choice([-1.0, 1.0], size=x.shape) * rng.uniform(
        0.5, 1.5, size=x.shape) * np.maximum(np.abs(x), 1.0)


def is_first_order(ratio: float) -> bool:
    return FIRST_ORDER_RATIO[0] < ratio < FIRST_ORDER_RATIO[1]


def is_second_order(ratio: float) -> bool:
    return SECOND_ORDER_RATIO[0] < ratio < SECOND_ORDER_RATIO[1]


def tiny_move_resolved(change: float, largest_output: float) -> bool:
    """Whether f, changing by `change` under the first probe step in first order, would have
    changed by more than float64 resolves under the tiny move."""
    resolution = FLOAT64_RESOLUTION_ULPS * machine_eps("float64") * largest_output
    return change * TINY_MOVE / PROBE_STEPS[0] > resolution
