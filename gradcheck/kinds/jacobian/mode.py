"""Full or fast mode: what full mode would hold in memory and how long its evaluations take."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gradcheck.engine.batch import point_bytes
from gradcheck.engine.program import Program
from gradcheck.errors import UsageError
from gradcheck.evidence.notes import ModeAsked, ModeReason, OverMemory, TooSlow, WithinBudgets
from gradcheck.options import CheckOptions
from gradcheck.spelling import Spelled, format_size


def _size(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


class Mode(Spelled):
    FULL = "full"  # every Jacobian block, by finite differences
    FAST = "fast"  # random projections


@dataclass(frozen=True)
class ModeChoice:
    mode: Mode
    reason: ModeReason


# Jacobian-sized float64 arrays full mode keeps per input (see full_mode_bytes).
FULL_MODE_ARRAYS = 6
# Under --mode auto, full mode is kept while its 2n evaluations of f (timed eagerly, an
# overestimate of vectorised batches) stay below this, or the input is small anyway.
AUTO_FULL_SECONDS = 60.0
AUTO_MIN_FAST_INPUTS = 8192


@dataclass(frozen=True)
class FullModeSize:
    """What full mode holds at once (`needed` bytes) for its largest input."""

    needed: int
    input: str = ""
    inputs: int = 0
    outputs: int = 0


def full_mode_bytes(program: Program, output_shapes: Sequence[Sequence[int]]) -> FullModeSize:
    """What full mode holds at once for its largest input: Jacobian-sized arrays (autodiff,
    the x±h evaluations, finite differences, their error estimates...) and one chunk."""
    worst = FullModeSize(0)
    outputs = sum(_size(s) for s in output_shapes)
    for slot in program.sources:
        n = _size(slot.shape)
        held = 8 * n * outputs * FULL_MODE_ARRAYS + point_bytes(slot.shape, output_shapes)
        if held > worst.needed:
            worst = FullModeSize(held, slot.name, n, outputs)
    return worst


def physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return 1 << 62  # unknown: do not refuse


def choose_mode(options: CheckOptions, program: Program,
                output_shapes: Sequence[Sequence[int]], call_seconds: float = 0.0) -> ModeChoice:
    """Full mode unless asked otherwise or, under auto, it would not fit the memory budget or
    would take minutes (2n evaluations of f, estimated from one eager call)."""
    if options.mode == "fast":
        return ModeChoice(Mode.FAST, ModeAsked("fast"))
    size = full_mode_bytes(program, output_shapes)
    needed = size.needed
    what = f"full mode on {size.input} ({size.inputs} inputs x {size.outputs} outputs)"
    if options.mode == "full":
        # Asked for explicitly, full mode may exceed the budget (which then sizes its chunks),
        # but not the machine: better a clear refusal than the out-of-memory killer.
        limit = max(options.max_memory, int(0.8 * physical_memory()))
        if needed > limit:
            raise UsageError(
                f"--mode full: {what} would hold about {format_size(needed)} of Jacobian-sized"
                f" arrays, more than this machine can spare ({format_size(limit)}); use --mode"
                " fast, or check a smaller input")
        return ModeChoice(Mode.FULL, ModeAsked("full"))
    if needed > options.max_memory:
        return ModeChoice(Mode.FAST, OverMemory(size.input, size.inputs, size.outputs, needed,
                                                options.max_memory))
    evaluations = 2 * max((_size(slot.shape) for slot in program.sources), default=0)
    if evaluations > AUTO_MIN_FAST_INPUTS and evaluations * call_seconds > AUTO_FULL_SECONDS:
        return ModeChoice(Mode.FAST, TooSlow(evaluations, call_seconds))
    return ModeChoice(Mode.FULL, WithinBudgets())
