"""Where TensorFlow cuts the path from an input to the outputs: tf.Variables created from it,
tracing failures (.numpy(), NumPy, float()), and cutting ops in the traced graph. Facts only;
diagnosis/graph_breaks.py words them."""

from __future__ import annotations

import contextlib
import re
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from gradcheck.engine.program import Program, path_ends
from gradcheck.engine.runtime import tensorflow
from gradcheck.forensics.cut_ops import (
    STOP_OPS,
    VALUE_INDEPENDENT_OPS,
    CutSite,
    frames_location,
    op_cut,
)
from gradcheck.forensics.op_types import OVERWRITING_WRITES, VARIABLE_WRITE_OPS
from gradcheck.forensics.stop_gradients import harmless_stops


def variable_creations(program: Program, slot_index: int) -> list[CutSite]:
    """tf.Variables created inside f from values that depend on the input."""
    tf = tensorflow()
    slot = program.slots[slot_index]
    cuts: list[CutSite] = []

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
                cuts.append(CutSite("variable", frames_location(traceback.extract_stack())))
            return next_creator(**kwargs)

        # f ran fine before; a failure here is not ours to report.
        with tf.variable_creator_scope(creator), contextlib.suppress(Exception):
            program.call()
    return cuts


# What the user wrote on the line where tracing failed: .numpy(), a Keras model's predict, a
# Python number's constructor (float(), int()), or NumPy.
_NUMPY_METHOD = re.compile(r"\.numpy\(\s*\)")
_KERAS_PREDICT = re.compile(r"\.predict(_on_batch)?\(")
_PYTHON_NUMBER = re.compile(r"(?<![\w.])(float|int|bool|complex)\(")
_NUMPY_CALL = re.compile(r"(?<![\w.])(np|numpy)\.")
# Python's math module takes a tensor as a float (math.pow(t, 2) is float(t) ** 2).
_PYTHON_MATH = re.compile(r"(?<![\w.])math\.(\w+)\(")


def _written(exc: BaseException) -> CutSite | None:
    """The cut the user's own line wrote, where tracing failed: the innermost user frame's
    source, so float() is not taken for .numpy() (which TensorFlow calls inside float())."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "__autograph_generated" not in str(f.filename)]
    location = frames_location(frames)
    line = next((f.line or "" for f in reversed(frames) if location is not None
                 and f.lineno == location.line and f.filename.endswith(location.path)), "")
    if _NUMPY_METHOD.search(line):
        return CutSite("numpy-method", location)
    if _KERAS_PREDICT.search(line):
        return CutSite("keras-predict", location)
    if (number := _PYTHON_NUMBER.search(line)) is not None and not _NUMPY_CALL.search(line):
        return CutSite("python-number", location, number.group(1))
    if (function := _PYTHON_MATH.search(line)) is not None and not _NUMPY_CALL.search(line):
        return CutSite("python-number", location, f"math.{function.group(1)}")
    if _NUMPY_CALL.search(line):
        return CutSite("numpy", location)
    return None


def _trace_failure(exc: BaseException) -> CutSite | None:
    text = str(exc)
    location = frames_location(traceback.extract_tb(exc.__traceback__))
    if (written := _written(exc)) is not None and (
            "numpy" in text.lower() or "symbolic" in text.lower() or "__array__" in text
            or "float()" in text or "int()" in text or "real number" in text):
        return written
    if isinstance(exc, (AttributeError, NotImplementedError)) and "numpy" in text:
        return CutSite("numpy-method", location)
    if "symbolic" in text.lower() or "__array__" in text or "numpy array" in text.lower():
        return CutSite("numpy", location)
    if isinstance(exc, TypeError) and ("float()" in text or "int()" in text):
        return CutSite("python-number", location)
    return None  # including a tf.Variable created on every call: variable_creations sees it


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


def ops_feeding(ends: Iterable[Any]) -> set[Any]:
    """Every op the tensors `ends` are computed from (themselves' ops included)."""
    seen: set[Any] = set()
    frontier = [t.op for t in ends]
    while frontier:
        op = frontier.pop()
        if op in seen:
            continue
        seen.add(op)
        frontier += [t.op for t in op.inputs]
    return seen


def _graph_of(call: Callable[..., Any], program: Program, slot_index: int) -> Any:
    """The graph of f traced by tf.function through `call` (one of the program's), the input
    as its placeholder (a variable captured)."""
    tf = tensorflow()
    slot = program.slots[slot_index]
    if slot.is_variable:
        return tf.function(lambda: path_ends(call()),
                           autograph=False).get_concrete_function().graph
    traced = tf.function(lambda point: path_ends(call({slot_index: point})), autograph=False)
    return traced.get_concrete_function(tf.TensorSpec(slot.shape, slot.dtype)).graph


def _trace(program: Program, slot_index: int) -> tuple[Any, CutSite | None, str | None]:
    """f traced with tf.function, without and then with AutoGraph: its graph, or the cut that
    stopped the trace, or why tracing failed."""
    failure: BaseException | None = None
    for call in (program.call, program.call_converted):
        try:
            return _graph_of(call, program, slot_index), None, None
        except Exception as exc:  # where tracing fails is itself the finding
            failure = exc
            cut = _trace_failure(exc)
            if cut is not None:
                return None, cut, None
    reason = str(failure).strip().splitlines()[0][:120] if failure else "unknown"
    return None, None, f"tracing f with tf.function failed ({reason})"


def traced_graph(program: Program) -> Any:
    """f traced with tf.function with respect to its first differentiable source, or None."""
    index = next((i for i, s in enumerate(program.slots) if s.differentiable), None)
    return None if index is None else _trace(program, index)[0]


def _variable_handles(graph: Any, slot: Any) -> list[Any]:
    """The graph's placeholders for a variable source's captured handle."""
    return [internal for external, internal in graph.captures if external is slot.value.handle]


def _starts(graph: Any, slot: Any) -> list[Any]:
    """Where the input enters the graph: its placeholder, or the reads of the variable."""
    if not slot.is_variable:
        return [graph.inputs[0]]
    handles = _variable_handles(graph, slot)
    return [op.outputs[0] for op in graph.get_operations()
            if op.type == "ReadVariableOp" and any(op.inputs[0] is h for h in handles)]


def _overwritten(graph: Any, slot: Any, backward: set[Any]) -> CutSite | None:
    """A variable source that f assigns (all of it or a slice) before it first reads it for
    the outputs (`backward`: the ops they need; `v[:2].assign(...)` reads v for nothing
    first): f never sees what it assigns over (tape.gradient differentiates the value read
    after the assignment)."""
    if not slot.is_variable:
        return None
    handles = _variable_handles(graph, slot)
    for op in graph.get_operations():
        if not any(t is h for t in op.inputs[:1] for h in handles):
            continue
        if op.type in OVERWRITING_WRITES:
            return CutSite("overwritten", frames_location(op.traceback), op.type)
        if (op.type == "ReadVariableOp" and op in backward) or op.type in VARIABLE_WRITE_OPS:
            return None
    return None


def _carried(op: Any, backward: set[Any], ends: set[int]) -> list[Any]:
    """The op's outputs that lead on to f's outputs."""
    return [t for t in op.outputs
            if id(t) in ends or any(c in backward for c in t.consumers())]


def _first_cuts(graph: Any, starts: list[Any], backward: set[Any]) -> list[Any]:
    """(op, cut) for the first cutting op on every path from the input to the outputs: the
    walk stops at each cut, so ops only reached through a cut are not blamed."""
    ends = {id(t) for t in graph.outputs}
    seen: set[Any] = set()
    found: list[Any] = []
    frontier = [consumer for tensor in starts for consumer in tensor.consumers()]
    while frontier:
        op = frontier.pop()
        if op in seen or op not in backward:
            continue
        seen.add(op)
        if op.type in VALUE_INDEPENDENT_OPS:
            continue
        cut = op_cut(op, _carried(op, backward, ends), no_gradient=True)
        if cut is not None:
            found.append((op, cut))
            continue
        frontier += [c for out in op.outputs for c in out.consumers()]
    order = {op: i for i, op in enumerate(graph.get_operations())}
    return [cut for op, cut in sorted(found, key=lambda pair: order.get(pair[0], 0))]


def _untraced_cuts(program: Program, slot_index: int, stopped: CutSite | None,
                   no_gradient: bool, none: bool) -> list[CutSite]:
    """When tf.function cannot trace f, the cuts in the ops f runs eagerly; what stopped the
    trace (.numpy(), float()) counts too, unless finite differences see no slope (then the
    ops are what gives none: a Python `if` on a value is no cut)."""
    from gradcheck.engine.recorded import recorded_cuts

    recorded = recorded_cuts(program, slot_index, no_gradient, none)
    if no_gradient and recorded:
        return recorded
    cuts = ([stopped] if stopped else []) + [
        cut for cut in recorded if stopped is None or cut.location != stopped.location]
    definite = [cut for cut in cuts if cut.kind != "piecewise-constant"]
    return definite or cuts


def graph_cuts(program: Program, slot_index: int, no_gradient: bool = False,
               none: bool = False) -> tuple[list[CutSite], str | None]:
    """Trace f with tf.function and list the cutting ops on the input→output path. `none`:
    autodiff gives the input None; `no_gradient`: and finite differences see no slope either
    (then the first cut on each path, whatever makes it)."""
    graph, stopped, note = _trace(program, slot_index)
    if graph is None:
        return _untraced_cuts(program, slot_index, stopped, no_gradient, none), note
    backward = ops_feeding(graph.outputs)
    overwritten = _overwritten(graph, program.slots[slot_index], backward)
    if overwritten is not None:
        return [overwritten], None
    starts = _starts(graph, program.slots[slot_index])
    if not starts:
        return [], "the traced graph never reads this variable"
    if no_gradient:
        return _first_cuts(graph, starts, backward), None
    forward = _reachable_forward(starts)
    cuts: list[CutSite] = []
    read_handles = {id(op.inputs[0]) for op in backward if op.type == "ReadVariableOp"}
    stops: list[str] = []  # per cut, the op's name where it is a stop_gradient
    for op in graph.get_operations():
        if op not in forward:
            continue
        cut: CutSite | None = None
        if op.type in VARIABLE_WRITE_OPS and id(op.inputs[0]) in read_handles:
            cut = CutSite("assign", frames_location(op.traceback), op.type)
        elif op in backward:
            cut = op_cut(op, none=none)
        if cut is None:
            continue
        cuts.append(cut)
        stops.append(op.name if op.type in STOP_OPS else "")
    if any(stops):
        harmless = harmless_stops(program, slot_index)
        cuts = [cut for cut, name in zip(cuts, stops) if name not in harmless]
    definite = [cut for cut in cuts if cut.kind != "piecewise-constant"]
    return definite or cuts, None


def locate_cuts(program: Program, slot_index: int, no_gradient: bool = False,
                none: bool = False) -> tuple[list[CutSite], str | None]:
    """Every cut found for one input, deduplicated by kind and location; a note if none."""
    cuts = variable_creations(program, slot_index)
    traced, note = graph_cuts(program, slot_index, no_gradient, none)
    seen = {(c.kind, c.location) for c in cuts}
    for cut in traced:
        if (cut.kind, cut.location) not in seen:
            seen.add((cut.kind, cut.location))
            cuts.append(cut)
    return cuts, note

