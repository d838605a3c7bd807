"""Find where the gradient path from an input is cut, at the user's source line."""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gradcheck.load.locations import innermost_user_frame
from gradcheck.tf.program import Program, flatten_outputs
from gradcheck.tf.runtime import tensorflow

USUAL_CAUSES = (
    "tf.Variable(...) built from inputs, .numpy()/float()/NumPy ops on tensors,"
    " tf.stop_gradient, casts to integer types, round/floor/ceil/argmax, tf.numpy_function,"
    " ops without a registered gradient"
)
VALUE_INDEPENDENT_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank", "ZerosLike", "OnesLike"})
STOP_OPS = frozenset({"StopGradient", "PreventGradient"})
# Zero gradient almost everywhere: a cause only when f is meant to vary continuously through
# them (e.g. fine quantisation), so they are listed only when no definite cut is found.
# Comparisons are left out: their booleans usually select between branches that do carry
# the gradient (tf.where, clip_by_norm).
PIECEWISE_CONSTANT_OPS = frozenset({"Round", "Floor", "Ceil", "Rint", "ArgMax", "ArgMin", "Sign"})
PYTHON_FUNCTION_OPS = frozenset({"PyFunc", "PyFuncStateless"})
VARIABLE_WRITE_OPS = frozenset({"AssignVariableOp", "AssignAddVariableOp",
                                "AssignSubVariableOp"})


@dataclass(frozen=True)
class Cut:
    kind: str
    location: str | None
    cause: str
    fix: str

    @property
    def message(self) -> str:
        return f"{self.cause}; {self.fix}"


def _frames_location(frames: Iterable[Any]) -> str | None:
    summaries = [f for f in frames if "__autograph_generated" not in str(f.filename)]
    return innermost_user_frame(summaries)


def variable_creations(program: Program, slot_index: int) -> list[Cut]:
    """tf.Variables created inside f from values that depend on the input."""
    tf = tensorflow()
    slot = program.slots[slot_index]
    cuts: list[Cut] = []

    with tf.GradientTape(persistent=True) as tape:
        tape.watch(slot.value)

        def creator(next_creator: Any, **kwargs: Any) -> Any:
            initial = kwargs.get("initial_value")
            value = initial() if callable(initial) else initial
            kwargs["initial_value"] = value
            depends = False
            try:
                tensor = tf.convert_to_tensor(value)
                if tensor.dtype.is_floating:
                    with tape.stop_recording():
                        depends = tape.gradient(tensor, slot.value) is not None
            except (TypeError, ValueError):
                pass
            if depends:
                cuts.append(Cut(
                    "variable", _frames_location(traceback.extract_stack()),
                    f"tf.Variable created from {slot.name} copies its values and cuts the"
                    " gradient path",
                    "use the tensor itself (tf.stack / tf.identity), not a new tf.Variable",
                ))
            return next_creator(**kwargs)

        # f ran fine before; a failure here is not ours to report.
        with tf.variable_creator_scope(creator), contextlib.suppress(Exception):
            program.call()
    return cuts


def _trace_failure(exc: BaseException, slot_name: str) -> Cut | None:
    text = str(exc)
    location = _frames_location(traceback.extract_tb(exc.__traceback__))
    if isinstance(exc, AttributeError) and "numpy" in text:
        return Cut("numpy", location,
                   f".numpy() copies the value of a tensor computed from {slot_name} out of"
                   " TensorFlow, so nothing computed from it has a gradient",
                   "keep the computation in TensorFlow ops")
    if "symbolic" in text.lower() or "__array__" in text or "numpy array" in text.lower():
        return Cut("numpy", location,
                   f"a NumPy operation (np.*, np.asarray, float()) on a tensor computed from"
                   f" {slot_name} leaves TensorFlow, so the result has no gradient",
                   "use the tf.* equivalent")
    if isinstance(exc, TypeError) and ("float()" in text or "int()" in text):
        return Cut("python-number", location,
                   f"float()/int() turns a tensor computed from {slot_name} into a Python"
                   " number, which has no gradient",
                   "keep it a tensor (tf.cast to a float dtype if needed)")
    if "Variable" in text and ("first call" in text or "singleton" in text):
        return None  # reported by variable_creations
    return None


def _op_cut(op: Any, slot_name: str) -> Cut | None:
    location = _frames_location(op.traceback)
    if op.type in STOP_OPS:
        return Cut("stop-gradient", location,
                   f"tf.stop_gradient blocks the gradient from {slot_name} on this path",
                   "remove it if the gradient should flow")
    if op.type == "Cast":
        target = op.outputs[0].dtype
        if not target.is_floating and not target.is_complex:
            return Cut("integer-cast", location,
                       f"a cast to {target.name} on the path from {slot_name}: integers carry"
                       " no gradient",
                       "keep the value in a floating dtype")
        return None
    if op.type in PYTHON_FUNCTION_OPS:
        return Cut("numpy-function", location,
                   f"tf.numpy_function on the path from {slot_name} has no gradient",
                   "use TensorFlow ops, or tf.py_function with a tf.custom_gradient")
    if op.type in PIECEWISE_CONSTANT_OPS:
        return Cut("piecewise-constant", location,
                   f"{op.type} on the path from {slot_name} is piecewise constant: its gradient"
                   " is zero or None",
                   "use a smooth surrogate if a gradient is wanted here")
    if op.outputs and all(out.dtype.is_bool for out in op.outputs):
        return None  # comparisons and logic: booleans select branches, they carry no values
    try:
        from tensorflow.python.framework import ops as tf_ops

        registered = tf_ops.get_gradient_function(op)
    except LookupError:
        return Cut("no-gradient", location,
                   f"{op.type} on the path from {slot_name} has no registered gradient",
                   "register one with tf.RegisterGradient or wrap it in tf.custom_gradient")
    except Exception:
        registered = True
    if registered is None and op.type not in VALUE_INDEPENDENT_OPS:
        return Cut("no-gradient", location,
                   f"{op.type} on the path from {slot_name} is marked not differentiable",
                   "use a differentiable op")
    return None


def _reachable_forward(start: Iterable[Any]) -> set[Any]:
    seen: set[Any] = set()
    frontier = [consumer for tensor in start for consumer in tensor.consumers()]
    while frontier:
        op = frontier.pop()
        if op in seen:
            continue
        seen.add(op)
        if op.type in VALUE_INDEPENDENT_OPS:
            continue
        frontier += [c for out in op.outputs for c in out.consumers()]
    return seen


def _reachable_backward(ends: Iterable[Any]) -> set[Any]:
    seen: set[Any] = set()
    frontier = [t.op for t in ends]
    while frontier:
        op = frontier.pop()
        if op in seen:
            continue
        seen.add(op)
        frontier += [t.op for t in op.inputs]
    return seen


def graph_cuts(program: Program, slot_index: int) -> tuple[list[Cut], str | None]:
    """Trace f with tf.function and list the cutting ops on the input→output path."""
    tf = tensorflow()
    slot = program.slots[slot_index]
    if slot.is_variable:
        return [], "the graph walk does not follow tf.Variable arguments"

    def traced(point: Any) -> list[Any]:
        leaves = flatten_outputs(program.call({slot_index: point}))
        return [leaf.tensor for leaf in leaves if leaf.differentiable]

    spec = tf.TensorSpec(slot.shape, slot.dtype)
    concrete = None
    failure: BaseException | None = None
    for autograph in (False, True):
        try:
            concrete = tf.function(traced, autograph=autograph).get_concrete_function(spec)
            break
        except Exception as exc:  # where tracing fails is itself the finding
            failure = exc
            cut = _trace_failure(exc, slot.name)
            if cut is not None:
                return [cut], None
    if concrete is None:
        reason = str(failure).strip().splitlines()[0][:120] if failure else "unknown"
        return [], f"tracing f with tf.function failed ({reason})"
    graph = concrete.graph
    placeholder = graph.inputs[0]
    forward = _reachable_forward([placeholder])
    backward = _reachable_backward(graph.outputs)
    cuts: list[Cut] = []
    read_handles = {id(op.inputs[0]) for op in backward if op.type == "ReadVariableOp"}
    for op in graph.get_operations():
        if op not in forward:
            continue
        if op.type in VARIABLE_WRITE_OPS and id(op.inputs[0]) in read_handles:
            cuts.append(Cut("assign", _frames_location(op.traceback),
                            f"a value computed from {slot.name} is assigned into a tf.Variable"
                            " and read back: the read has no gradient to it",
                            "use the tensor itself instead of a variable round trip"))
        elif op in backward:
            cut = _op_cut(op, slot.name)
            if cut is not None:
                cuts.append(cut)
    definite = [cut for cut in cuts if cut.kind != "piecewise-constant"]
    return definite or cuts, None


def locate_cuts(program: Program, slot_index: int) -> tuple[list[Cut], str | None]:
    """Every cut we can find for one input, deduplicated by location; a note if none."""
    cuts = variable_creations(program, slot_index)
    traced, note = graph_cuts(program, slot_index)
    seen = {(c.kind, c.location) for c in cuts}
    for cut in traced:
        if (cut.kind, cut.location) not in seen:
            seen.add((cut.kind, cut.location))
            cuts.append(cut)
    return cuts, note
