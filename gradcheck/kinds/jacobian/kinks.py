"""Kinks a finite-difference step crosses without showing in second differences: autodiff
followed across the step, where a failing element's differences disagree with it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gradcheck.checks.context import CheckContext
from gradcheck.engine.neighbourhood import gradients_along
from gradcheck.numerics import differences, float32, judging
from gradcheck.numerics.differences import FiniteDifference

# Failing elements whose derivative is followed across the step, worst first: each costs one
# backward pass per point the differences stepped to. More failures than this are not taken for
# kinks the steps crossed.
KINK_PROBES = 16


def with_crossed_kinks(ctx: CheckContext, fd: FiniteDifference, slot_index: int,
                       steps: np.ndarray, precise: bool, k: int,
                       block: np.ndarray) -> FiniteDifference:
    """Output k's differences, with the failing elements where autodiff itself changes across
    the step enough to explain them marked as kinks: the step crossed a kink too shallow for
    second differences to show above rounding (float32 ReLUs that batch normalisation centres
    on 0)."""
    slot, output = ctx.program.slots[slot_index], ctx.outputs[k]
    if slot.complex_dtype or output.complex_dtype:
        return fd
    allowed = judging.allowed_errors(block, fd.jacobian, ctx.fd_tolerance, fd.error_estimate)
    with np.errstate(invalid="ignore", divide="ignore"):
        excess = np.abs(block - fd.jacobian) / allowed
    failing = np.isfinite(block) & np.isfinite(fd.jacobian) & (excess > 1.0) & ~fd.kink
    count = int(np.count_nonzero(failing))
    if count == 0 or count > KINK_PROBES:
        return fd
    factors = float32.FACTORS if precise else differences.STEP_FACTORS
    steps, rank = steps.reshape(-1), len(output.shape)
    crossed = np.zeros_like(failing)
    for flat in np.argsort(-np.where(failing, excess, 0.0), axis=None)[:count]:
        index = tuple(int(i) for i in np.unravel_index(flat, block.shape))
        element = int(np.ravel_multi_index(index[rank:], slot.shape)) if slot.shape else 0
        moves = np.asarray(factors) * float(steps[element])
        rows = gradients_along(ctx.program, slot_index, k, index[:rank],
                               element, moves.tolist())
        if rows is None:
            return fd
        if not differences.crossed_kink_between(
                moves, rows.reshape(len(factors), -1)[:, element], float(block[index]),
                float(fd.jacobian[index]), float(allowed[index])):
            return fd  # a failure no kink explains: the comparison stands
        crossed[index] = True
    return replace(fd, kink=fd.kink | crossed)
