"""How much gradient each tf.stop_gradient on f's path blocks at the point: a stop_gradient is a
cut only where the dependence it hides is there (tf.nn.moments' stop_gradient(mean) hides a
term that is zero by construction)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gradcheck.engine.program import Program, path_ends
from gradcheck.engine.runtime import tensorflow
from gradcheck.forensics.cut_ops import STOP_OPS
from gradcheck.numerics.tolerances import machine_eps

# A stop_gradient that keeps less than this many roundoffs of the gradient from the input
# blocks nothing: the term it hides is zero by construction.
HARMLESS_ROUNDOFFS = 1e3


def harmless_stops(program: Program, slot_index: int) -> set[str]:
    """The stop_gradient ops (by name in f's trace) that keep no gradient from the input at the
    point, where that can be computed."""
    shares = blocked_shares(program, slot_index)
    limit = HARMLESS_ROUNDOFFS * machine_eps(program.compute_dtype)
    return {name for name, share in (shares or {}).items() if share <= limit}


def blocked_shares(program: Program, slot_index: int, seed: int = 0) -> dict[str, float] | None:
    """Per stop_gradient op (by its name in f's trace, as forensics/graph.py traces it): the norm of
    the gradient of uᵀy (u random) it keeps from the input, over the norm of the gradient f
    would have with none of them; None when that cannot be computed."""
    tf = tensorflow()
    slot = program.slots[slot_index]
    for call in (program.call, program.call_converted):
        names: list[str] = []
        try:
            traced = tf.function(_blocked_by_each(program, slot_index, call, names, seed),
                                 autograph=False)
            norms, scale = traced() if slot.is_variable else traced(slot.value)
        except Exception:  # noqa: BLE001 - the next way of tracing, else no answer
            continue
        size, blocked = float(scale), np.asarray(norms)
        if not np.isfinite(size) or not np.all(np.isfinite(blocked)):
            return None  # f or its gradient is NaN or infinite here: no share is measured
        return {name: float(norm) / size if size > 0 else 0.0
                for name, norm in zip(names, blocked)}
    return None


def _blocked_by_each(program: Program, slot_index: int, call: Callable[..., Any],
                     names: list[str], seed: int) -> Callable[..., tuple[Any, Any]]:
    """f through `call`, then each stop_gradient's blocked norm and the unblocked gradient's
    (the stop_gradient ops' names left in `names`)."""
    tf = tensorflow()
    slot = program.slots[slot_index]

    def blocked(*point: Any) -> tuple[Any, Any]:
        ends = path_ends(call({slot_index: point[0]}) if point else call())
        graph = tf.compat.v1.get_default_graph()
        starts = _starts(graph, slot, point)
        rng = np.random.default_rng(seed)
        total = tf.add_n([tf.reduce_sum(end * tf.constant(
            rng.standard_normal(end.shape.as_list()), dtype=end.dtype))
            for end in ends if end.dtype.is_floating])
        stops = [op for op in graph.get_operations() if op.type in STOP_OPS]
        names[:] = [op.name for op in stops]
        shares = [_blocked_norm(tf, total, op, starts) for op in stops] or [
            tf.constant(0.0, tf.float64)]
        through = tf.gradients(total, starts, unconnected_gradients="zero")
        return tf.stack(shares), _norm(tf, through) + tf.add_n(shares)

    return blocked


def _starts(graph: Any, slot: Any, point: tuple[Any, ...]) -> list[Any]:
    if point:
        return [point[0]]
    handles = [internal for external, internal in graph.captures
               if external is slot.value.handle]
    return [op.outputs[0] for op in graph.get_operations()
            if op.type == "ReadVariableOp" and any(op.inputs[0] is h for h in handles)]


def _blocked_norm(tf: Any, total: Any, op: Any, starts: list[Any]) -> Any:
    """‖(∂total/∂stop's output) · ∂(stop's input)/∂x‖: what letting it through would add."""
    upstream = tf.gradients(total, op.outputs[0])[0]
    if upstream is None or not op.inputs[0].dtype.is_floating:
        return tf.constant(0.0, tf.float64)
    return _norm(tf, tf.gradients(op.inputs[0], starts, grad_ys=upstream,
                                  unconnected_gradients="zero"))


def _norm(tf: Any, tensors: list[Any]) -> Any:
    squares = [tf.reduce_sum(tf.square(tf.cast(t, tf.float64))) for t in tensors if t is not None]
    return tf.sqrt(tf.add_n(squares)) if squares else tf.constant(0.0, tf.float64)
