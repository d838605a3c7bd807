"""Why tape.jacobian's vectorised path (pfor) failed: the op pfor was converting when it
raised, read from the frames of the exception, and the error at the root."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradcheck.engine.program import Program, first_line
from gradcheck.engine.runtime import tensorflow
from gradcheck.evidence import Location
from gradcheck.evidence.notes import WhileLoopJacobian
from gradcheck.forensics.values import op_location

# How many graphs (f's and the functions it calls) are searched for a forward op's line.
_MAX_GRAPHS = 64

# Ops pfor passes through on its way to the one that fails: function calls it converts by
# converting their bodies, and the identities gradients begin with.
_PASSED_THROUGH = frozenset({"PartitionedCall", "StatefulPartitionedCall", "Identity", "NoOp"})


@dataclass(frozen=True)
class PforFailure:
    """The op pfor failed to vectorise (`op`, its graph name `name`, the user's line that made
    it when there is one) and the error at the root of the chain (`root`)."""

    op: str | None
    name: str | None
    location: Location | None
    root: str


def _chain(exc: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not e for e in found):
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def _converted_ops(chain: list[BaseException]) -> list[Any]:
    """The ops pfor's converter was working on, outermost first, from its frames' locals."""
    ops: list[Any] = []
    for exc in chain:
        tb = exc.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_name == "_convert_helper" and Path(code.co_filename).name == "pfor.py":
                op = tb.tb_frame.f_locals.get("y_op")
                if op is not None and all(op is not known for known in ops):
                    ops.append(op)
            tb = tb.tb_next
    return ops


def pfor_failure(exc: BaseException) -> PforFailure:
    """What pfor failed on, as far as the exception tells."""
    chain = _chain(exc)
    ops = _converted_ops(chain)
    chosen = [op for op in ops if op.type not in _PASSED_THROUGH] or ops
    op = chosen[0] if chosen else None
    return PforFailure(None if op is None else str(op.type), None if op is None else op.name,
                       None if op is None else op_location(op), first_line(chain[-1]))


def gradient_of(name: str | None) -> str | None:
    """The forward op a gradient op was made for, by name ('gradients/rot90/cond_grad/If':
    'rot90/cond'), or None for a forward op."""
    if name is None or not name.startswith("gradients/") or "_grad/" not in name:
        return None
    return name.removeprefix("gradients/").split("_grad/")[0]


def _forward_location(program: Program, name: str) -> Location | None:
    """The user's line of the op named `name` in f's graph, or in a function f calls (a
    tf.function of the user's own, compiled or not)."""
    tf = tensorflow()
    try:
        graph = tf.function(program.call, autograph=False).get_concrete_function().graph
    except Exception:  # noqa: BLE001 - f cannot be traced: no line
        return None
    pending, seen = [graph], 0
    while pending and seen < _MAX_GRAPHS:
        current = pending.pop()
        seen += 1
        for op in current.get_operations():
            if op.name == name or op.name.endswith(f"/{name}"):
                return op_location(op)
        pending += [g for g in (getattr(f, "graph", None) for f in getattr(
            current, "_functions", {}).values()) if g is not None]
    return None


def while_loop_note(error: str, exc: BaseException | None, program: Program
                    ) -> WhileLoopJacobian:
    """The note for a Jacobian taken by the while loop after pfor raised `exc` (None: the
    vectorised path failed otherwise, e.g. returned None)."""
    if exc is None:
        return WhileLoopJacobian(error)
    failure = pfor_failure(exc)
    forward = gradient_of(failure.name)
    location = failure.location or (None if forward is None else
                                    _forward_location(program, forward))
    return WhileLoopJacobian(error, failure.op, failure.name, location, failure.root)
