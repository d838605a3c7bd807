"""Why f's values differ under XLA: a tf.where whose condition XLA decides otherwise than eager
TensorFlow at the point (a tie that a differently rounded reduction breaks the other way), its
line, the element and the compared values; else the first op XLA computes otherwise
(diverging_ops.py). Facts only; the compiled kind's evidence words them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.engine.program import Program
from gradcheck.evidence import Location
from gradcheck.forensics.diverging_ops import OpDiverged, first_diverged
from gradcheck.forensics.non_finite import SELECT_OPS
from gradcheck.forensics.values import TracedValues, library_of, op_location, trace_values

# Comparisons whose operands are shown (the tie) next to the flipped condition.
_COMPARISONS = frozenset({"Greater", "GreaterEqual", "Less", "LessEqual", "Equal", "NotEqual"})
# Operands this many epsilons apart (relative) are a tie a reassociated reduction can break.
TIE_EPSILONS = 64.0


@dataclass(frozen=True)
class WhereFlipped:
    """A tf.where (at `location`) taking the other branch under XLA at `index` (`count`
    elements); its condition's `comparison` (Greater...) of operands `eager` and `compiled`."""

    location: Location | None
    index: tuple[int, ...]
    count: int
    comparison: str
    eager: tuple[float, ...]
    compiled: tuple[float, ...]


def _operands(traced: TracedValues, condition: object, index: tuple[int, ...],
              shape: tuple[int, ...]) -> tuple[float, ...]:
    found = []
    for tensor in getattr(condition, "inputs", ()):
        value = traced.value(tensor)
        if value is None:
            return ()
        try:
            found.append(float(np.broadcast_to(value, shape)[index]))
        except (ValueError, IndexError):
            return ()
    return tuple(found)


def xla_difference(program: Program, output_indices: Sequence[int], own_dtype: bool,
                   atol: float) -> WhereFlipped | OpDiverged | None:
    """The tf.where in the user's code whose condition differs between eager and XLA, else
    the first op whose value XLA computes otherwise (beyond `atol` and rounding)."""
    eager = trace_values(program, output_indices, gradients=False, own_dtype=own_dtype)
    xla = trace_values(program, output_indices, gradients=False, jit=True, own_dtype=own_dtype)
    if eager is None or xla is None:
        return None
    return _where_flip(eager, xla) or first_diverged(eager, xla, atol)


def _where_flip(eager: TracedValues, xla: TracedValues) -> WhereFlipped | None:
    for op in eager.ops:
        if op.type not in SELECT_OPS or library_of(op) is not None:
            continue
        condition = op.inputs[0]
        before, after = eager.value(condition), xla.values.get(condition.name)
        if before is None or after is None or before.shape != after.shape:
            continue
        flipped = before != after
        if not flipped.any():
            continue
        index = tuple(int(i) for i in np.argwhere(flipped)[0])
        if condition.op.type not in _COMPARISONS:
            continue
        operands = _operands(eager, condition.op, index, before.shape)
        if not _tie(operands, condition.op.inputs[0].dtype):
            continue  # a flip that is no tie (random values): not this
        xla_op = next((o for o in xla.ops if o.name == condition.op.name), None)
        return WhereFlipped(op_location(op), index, int(flipped.sum()), condition.op.type,
                            operands,
                            _operands(xla, xla_op, index, before.shape) if xla_op else ())
    return None


def _tie(operands: tuple[float, ...], dtype: Any) -> bool:
    """Two compared values equal to within the rounding a reassociated sum may change."""
    if len(operands) != 2 or not getattr(dtype, "is_floating", False):
        return False
    a, b = operands
    eps = float(np.finfo(dtype.as_numpy_dtype).eps)
    return abs(a - b) <= TIE_EPSILONS * eps * max(abs(a), abs(b), eps)
