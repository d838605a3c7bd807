"""What one op does to the gradient path: the cut it makes (a stop_gradient, an integer cast,
an op without a gradient), for ops of a traced graph and ops recorded eagerly alike. Facts
only; diagnosis/graph_breaks.py words them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gradcheck.engine.runtime import tensorflow
from gradcheck.evidence import Location
from gradcheck.load.locations import innermost_user_frame

VALUE_INDEPENDENT_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank", "ZerosLike", "OnesLike"})
STOP_OPS = frozenset({"StopGradient", "PreventGradient"})
# Zero gradient almost everywhere: a cause only when f is meant to vary continuously through
# them (e.g. fine quantisation), so they are listed only when no definite cut is found.
# Comparisons are left out: their booleans usually select between branches that do carry
# the gradient (tf.where, clip_by_norm).
PIECEWISE_CONSTANT_OPS = frozenset({"Round", "Floor", "Ceil", "Rint", "ArgMax", "ArgMin", "Sign"})
PYTHON_FUNCTION_OPS = frozenset({"PyFunc", "PyFuncStateless"})
# tf.py_function: differentiable when its Python function runs TensorFlow ops on the tape, so
# a cut only when the source gets no gradient at all.
EAGER_FUNCTION_OPS = frozenset({"EagerPyFunc"})
FUNCTION_CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})


@dataclass(frozen=True)
class CutSite:
    """One place where the gradient path is cut: what cuts it (`kind`), where, the op type
    involved (`detail`) and the dtype of what it returns (integer casts and outputs)."""

    kind: str  # variable, numpy, python-number, stop-gradient, integer-cast, numpy-function,
    # piecewise-constant, no-gradient, not-differentiable, assign, overwritten; and where a
    # source gets no gradient at all: comparison, integer-output, python-function
    location: Location | None
    detail: str = ""
    dtype: str | None = None


def frames_location(frames: Iterable[Any]) -> Location | None:
    summaries = [f for f in frames if "__autograph_generated" not in str(f.filename)]
    return innermost_user_frame(summaries)


def has_gradient(op: Any) -> bool | None:
    """True when the op has a gradient function, False when it is marked not differentiable,
    None when no gradient is registered for it (asked of the graph with tf.gradients)."""
    tf = tensorflow()
    floats = [t for t in op.inputs if t.dtype.is_floating]
    outputs = [t for t in op.outputs if t.dtype.is_floating]
    if not floats or not outputs:
        return True
    if not hasattr(op, "graph"):
        return registered_gradient(op.type)
    try:
        with op.graph.as_default():
            grads = tf.gradients(outputs, floats)
    except LookupError:
        return None
    except Exception:
        return True
    return any(g is not None for g in grads)


def registered_gradient(op_type: str) -> bool | None:
    """has_gradient for an op run eagerly, from the gradient registry: True for a call of a
    tf.function (not an op of TensorFlow's, so differentiated through its body)."""
    from tensorflow.python.framework import op_def_registry, ops

    if op_def_registry.get(op_type) is None:
        return True
    try:
        return ops._gradient_registry.lookup(op_type) is not None
    except LookupError:
        return None


def _function_depends(op: Any) -> bool:
    """Whether a function call's outputs depend on its inputs inside the function (a
    tf.function returning a constant has no gradient only because nothing depends on x)."""
    try:
        graph = op.graph._get_function(op.get_attr("f").name).graph
    except Exception:  # noqa: BLE001 - not a function we can look into: assume it does
        return True
    inputs = {t.ref() for t in graph.inputs}
    seen: set[Any] = set()
    stack = [t.op for t in graph.outputs]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if any(t.ref() in inputs for t in current.inputs):
            return True
        stack += [t.op for t in current.inputs]
    return False


def _discrete_output(op: Any, carried: list[Any], location: Location | None) -> CutSite | None:
    """An op whose outputs on the path are booleans or integers: piecewise constant."""
    if not carried or any(t.dtype.is_floating or t.dtype.is_complex for t in carried):
        return None
    if all(t.dtype.is_bool for t in carried):
        return CutSite("comparison", location, op.type)
    return CutSite("integer-output", location, op.type, carried[0].dtype.name)


def op_cut(op: Any, carried: list[Any] | None = None, no_gradient: bool = False,
           none: bool = False) -> CutSite | None:
    """The cut this op makes on the path, if any. `carried`: its outputs on the path to f's
    outputs. With `none` (autodiff gives the source None, so every path is cut) tf.py_function
    counts; with `no_gradient` (and finite differences are flat) booleans and integers too."""
    location = frames_location(op.traceback)
    if op.type in STOP_OPS:
        return CutSite("stop-gradient", location, op.type)
    if op.type == "Cast":
        target = op.outputs[0].dtype
        if not target.is_floating and not target.is_complex:
            return CutSite("integer-cast", location, op.type, target.name)
        return None
    if op.type in PYTHON_FUNCTION_OPS:
        return CutSite("numpy-function", location, op.type)
    if (none or no_gradient) and op.type in EAGER_FUNCTION_OPS:
        return CutSite("python-function", location, op.type)
    if op.type in PIECEWISE_CONSTANT_OPS:
        return CutSite("piecewise-constant", location, op.type)
    if no_gradient and (discrete := _discrete_output(op, carried or [], location)):
        return discrete
    if op.outputs and all(out.dtype.is_bool for out in op.outputs):
        return None  # comparisons and logic: booleans select branches, they carry no values
    if op.type in VALUE_INDEPENDENT_OPS:
        return None
    if op.type in FUNCTION_CALL_OPS and not _function_depends(op):
        return None
    registered = has_gradient(op)
    if registered is None:
        return CutSite("no-gradient", location, op.type)
    if registered is False:
        return CutSite("not-differentiable", location, op.type)
    return None
