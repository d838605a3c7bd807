"""The first op of f whose value under XLA differs from the eager one while its inputs agree
to within rounding (a kernel XLA computes otherwise, or an ill-conditioned op amplifying
rounding): its line, the element and both values. Facts only; the compiled kind's evidence
words them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.evidence import Location
from gradcheck.forensics.culprits import is_random_op
from gradcheck.forensics.values import TracedValues, op_location
from gradcheck.forensics.wrong_gradients import XLA_UNCONJUGATED_KERNELS
from gradcheck.numerics.judging import differ_beyond, finite_scale

# Values this many epsilons of their tensor's scale apart are rounding (XLA reassociates).
ROUNDING_EPSILONS = 64.0
# The gradient kernels themselves (raw ops fuzzing reports call): XLA leaves out the conjugate.
_UNCONJUGATED = frozenset(XLA_UNCONJUGATED_KERNELS.values())


@dataclass(frozen=True)
class OpDiverged:
    """The first op of f (type `op`, at `location`) whose value under XLA differs from the
    eager one while its inputs agree to within rounding: at `index` (`count` elements) it is
    `eager` eagerly and `compiled` under XLA; `unconjugated`: its complex XLA kernel leaves
    out the conjugate its eager one applies; `random`: a random op (XLA draws its own)."""

    location: Location | None
    op: str
    index: tuple[int, ...]
    count: int
    eager: complex
    compiled: complex
    unconjugated: bool = False
    random: bool = False


def _differs(eager: np.ndarray, xla: np.ndarray, atol: float) -> np.ndarray | None:
    """Where two values of one tensor differ beyond rounding (None: not comparable)."""
    if eager.shape != xla.shape or eager.dtype.kind not in "fc":
        return None
    eps = float(np.finfo(eager.dtype).eps)
    return differ_beyond(xla, eager, atol + ROUNDING_EPSILONS * eps * finite_scale(eager))


def _agrees(eager: TracedValues, xla: TracedValues, tensor: Any, atol: float) -> bool:
    before, after = eager.value(tensor), xla.values.get(tensor.name)
    if before is None or after is None:
        return True  # not fetched (an integer index): the same in both
    differs = _differs(before, after, atol)
    if differs is None:  # a boolean mask, say: compared exactly
        return before.shape == after.shape and bool(np.array_equal(before, after))
    return not differs.any()


def first_diverged(eager: TracedValues, xla: TracedValues, atol: float) -> OpDiverged | None:
    """The first forward op (in f's order) whose inputs agree and whose output does not."""
    for op in eager.ops[:eager.backward_start]:
        if not all(_agrees(eager, xla, t, atol) for t in op.inputs):
            continue
        for tensor in op.outputs:
            before, after = eager.value(tensor), xla.values.get(tensor.name)
            if before is None or after is None:
                continue
            differs = _differs(before, after, atol)
            if differs is None or not differs.any():
                continue
            index = tuple(int(i) for i in np.argwhere(differs)[0])
            unconjugated = op.type in _UNCONJUGATED and before.dtype.kind == "c"
            return OpDiverged(op_location(op), op.type, index, int(differs.sum()),
                              complex(before[index]), complex(after[index]), unconjugated,
                              is_random_op(op.type))
    return None
