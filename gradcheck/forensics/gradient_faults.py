"""A gradient that raises inside TensorFlow's own registered gradient of an op (no custom
gradient of the user's on the way): which op, and where the user's code created it."""

from __future__ import annotations

import os
from dataclasses import dataclass

from gradcheck.engine.program import Program
from gradcheck.evidence import Location
from gradcheck.forensics.values import op_location

_TENSORFLOW_OPS = os.sep + os.path.join("tensorflow", "python", "ops") + os.sep


@dataclass(frozen=True)
class TensorFlowGradientFault:
    """TensorFlow's gradient function for op type `op` raised; `location`: the user's line
    that created the op (from f traced by tf.function), when found."""

    op: str
    location: Location | None


def _raising_gradient_op(error: BaseException) -> str | None:
    """The op type whose registered gradient function (in tensorflow/python/ops) was running
    when `error` was raised, innermost first; None when a user frame is inside it."""
    tb = error.__traceback__
    found: str | None = None
    while tb is not None:
        frame = tb.tb_frame
        name = frame.f_code.co_filename
        op_type = getattr(frame.f_locals.get("op"), "type", None)
        if _TENSORFLOW_OPS in name and isinstance(op_type, str) and \
                frame.f_code.co_name.endswith("Grad"):
            found = op_type
        tb = tb.tb_next
    return found


def tensorflow_gradient_fault(program: Program, error: BaseException
                              ) -> TensorFlowGradientFault | None:
    """Whether `error` came from TensorFlow's own gradient of an op, and which."""
    op_type = _raising_gradient_op(error)
    if op_type is None:
        return None
    return TensorFlowGradientFault(op_type, _first_located(program, op_type))


def _first_located(program: Program, op_type: str) -> Location | None:
    from gradcheck.engine.recorded import record
    from gradcheck.forensics.graph import traced_graph

    graph = traced_graph(program)
    recording = record(program) if graph is None else None  # f runs eagerly only
    ops = graph.get_operations() if graph is not None else recording.ops if recording else []
    for op in ops:
        if op.type == op_type and (location := op_location(op)) is not None:
            return location
    return None
