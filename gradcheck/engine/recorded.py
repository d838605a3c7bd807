"""f run eagerly with every op it executes recorded (TensorFlow's op callbacks), each with the
user's line: the dataflow of a call, for the cuts on the path from a source to the outputs
when tf.function cannot trace f (.numpy(), float(), a Python `if` on a value)."""

from __future__ import annotations

import contextlib
import functools
import sys
import traceback
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcheck.engine.program import Program, flatten_outputs
from gradcheck.forensics.cut_ops import VALUE_INDEPENDENT_OPS, CutSite, op_cut
from gradcheck.user_code import is_gradcheck_file, is_user_file


@dataclass(eq=False)
class RecordedOp:
    """One op f executed eagerly: its type, the tensors it read and made, and the frames of
    the call inside f (outermost first; gradcheck's own frames around f left out)."""

    type: str
    inputs: tuple[Any, ...]
    outputs: tuple[Any, ...]
    traceback: list[traceback.FrameSummary]
    scope: str = ""  # the Keras layers running it (recorded with `scopes` only)
    layers: tuple[Any, ...] = ()  # those layers themselves, outermost first (first_non_finite_op)


@dataclass
class RecordedCall:
    """The ops of one eager call of f, in execution order, and what it returned."""

    ops: list[RecordedOp]
    result: Any
    # f's differentiable outputs as gradcheck flattens them (a complex one: its parts), made
    # while recording, so that the ops making them are recorded too.
    ends: list[Any] = field(default_factory=list)
    producer: dict[int, RecordedOp] = field(default_factory=dict)
    consumers: dict[int, list[RecordedOp]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for op in self.ops:
            for tensor in op.outputs:
                self.producer[id(tensor)] = op
            for tensor in op.inputs:
                self.consumers.setdefault(id(tensor), []).append(op)


@functools.lru_cache(maxsize=1024)
def _is_ours(filename: str) -> bool:
    return is_gradcheck_file(filename)


def _frames_inside_f() -> list[traceback.FrameSummary]:
    """The stack of the op being executed, from f's frame inwards."""
    walked = traceback.walk_stack(sys._getframe(2))
    frames = list(reversed(traceback.StackSummary.extract(walked, lookup_lines=False)))
    ours = [i for i, frame in enumerate(frames) if _is_ours(frame.filename)]
    # gradcheck's frames inside f (its wrapper of a custom gradient TensorFlow calls) stay.
    first_user = next((i for i, frame in enumerate(frames)
                       if is_user_file(frame.filename) and not _is_ours(frame.filename)), None)
    outer = [i for i in ours if first_user is None or i < first_user]
    return frames[outer[-1] + 1:] if outer else frames


@contextlib.contextmanager
def _recording_ops(ops: list[RecordedOp], scopes: bool = False) -> Iterator[None]:
    from tensorflow.python.framework import op_callbacks

    from gradcheck.targets.keras import layer_scope

    def callback(op_type: Any, inputs: Any, attrs: Any, outputs: Any,
                 op_name: Any = None, graph: Any = None) -> None:
        if graph is None:  # run eagerly, not an op traced into a tf.function's graph
            name = op_type.decode() if isinstance(op_type, bytes) else str(op_type)
            ops.append(RecordedOp(name, tuple(inputs or ()), tuple(outputs or ()),
                                  _frames_inside_f(), layer_scope() if scopes else ""))

    op_callbacks.add_op_callback(callback)
    try:
        yield
    finally:
        op_callbacks.remove_op_callback(callback)


def record(program: Program, scopes: bool = False) -> RecordedCall | None:
    """f called once eagerly with its ops recorded (with `scopes`, each with the Keras layers
    running it); None when f raised (it ran fine before, so that is not ours to report)."""
    ops: list[RecordedOp] = []
    try:
        with _recording_ops(ops, scopes):
            result = program.call()
            flat = flatten_outputs(result)
    except Exception:  # noqa: BLE001
        return None
    return RecordedCall(ops, result, [leaf.tensor for leaf in flat if leaf.differentiable] or [
        leaf.tensor for leaf in flat if hasattr(leaf.tensor, "dtype")])


class _Found(Exception):
    """Raised inside f's eager call to stop it at the op sought."""


def _non_finite(tensors: Any) -> list[bool]:
    found = []
    for tensor in tensors or ():
        dtype = getattr(tensor, "dtype", None)
        if dtype is None or not (dtype.is_floating or dtype.is_complex):
            continue
        found.append(not bool(np.all(np.isfinite(np.asarray(tensor)))))
    return found


def first_non_finite_op(program: Program) -> RecordedOp | None:
    """f called eagerly until its first op that makes non-finite values out of finite ones
    (inside a loop's body too: a Keras RNN's cell), recorded with its frames and Keras layers;
    f stops there. None when no op does."""
    from tensorflow.python.framework import op_callbacks

    from gradcheck.targets.keras import layer_scope, running_layers

    found: list[RecordedOp] = []

    def callback(op_type: Any, inputs: Any, attrs: Any, outputs: Any,
                 op_name: Any = None, graph: Any = None) -> None:
        made = _non_finite(outputs)
        if graph is not None or not any(made) or any(_non_finite(inputs)):
            return
        name = op_type.decode() if isinstance(op_type, bytes) else str(op_type)
        found.append(RecordedOp(name, tuple(inputs or ()), tuple(outputs or ()),
                                _frames_inside_f(), layer_scope(), tuple(running_layers())))
        raise _Found

    op_callbacks.add_op_callback(callback)
    try:
        program.call()
    except Exception:  # noqa: BLE001 - _Found, or f raising: what was found is the answer
        pass
    finally:
        op_callbacks.remove_op_callback(callback)
    return found[0] if found else None


def _ends(recording: RecordedCall) -> list[Any]:
    return recording.ends


def _starts(program: Program, slot_index: int) -> list[Any]:
    slot = program.slots[slot_index]
    return [slot.value.handle] if slot.is_variable else [slot.value]


def _backward(recording: RecordedCall, ends: Iterable[Any]) -> set[RecordedOp]:
    seen: set[RecordedOp] = set()
    frontier = [op for t in ends if (op := recording.producer.get(id(t))) is not None]
    while frontier:
        op = frontier.pop()
        if op not in seen:
            seen.add(op)
            frontier += [p for t in op.inputs if (p := recording.producer.get(id(t)))]
    return seen


def _forward(recording: RecordedCall, starts: Iterable[Any], backward: set[RecordedOp],
             stop_at: Any = None) -> list[RecordedOp]:
    """Ops on a path from the source to the outputs, in execution order; with `stop_at`, the
    walk goes no further than the ops it says cut the path (those only are returned)."""
    seen: set[RecordedOp] = set()
    stopped: set[RecordedOp] = set()
    frontier = [op for t in starts for op in recording.consumers.get(id(t), [])]
    while frontier:
        op = frontier.pop()
        if op in seen or op not in backward:
            continue
        seen.add(op)
        if stop_at is not None and stop_at(op):
            stopped.add(op)
        elif op.type not in VALUE_INDEPENDENT_OPS:
            frontier += [c for t in op.outputs for c in recording.consumers.get(id(t), [])]
    return [op for op in recording.ops if op in (seen if stop_at is None else stopped)]


def _carried(recording: RecordedCall, op: RecordedOp, backward: set[RecordedOp],
             ends: set[int]) -> list[Any]:
    return [t for t in op.outputs if id(t) in ends
            or any(c in backward for c in recording.consumers.get(id(t), []))]


def ops_on_path(program: Program, slot_index: int) -> list[RecordedOp]:
    """The ops of one eager call of f on a path from the source to f's outputs."""
    recording = record(program)
    if recording is None:
        return []
    backward = _backward(recording, _ends(recording))
    return _forward(recording, _starts(program, slot_index), backward)


def recorded_cuts(program: Program, slot_index: int, no_gradient: bool = False,
                  none: bool = False) -> list[CutSite]:
    """The cuts graph_cuts finds in f's traced graph, found in the ops f ran eagerly: with
    `no_gradient` the first cut on every path, else every cutting op (definite ones first)."""
    recording = record(program)
    if recording is None:
        return []
    ends = _ends(recording)
    backward = _backward(recording, ends)
    starts = _starts(program, slot_index)
    if no_gradient:
        end_ids = {id(t) for t in ends}
        cut_of: dict[RecordedOp, CutSite | None] = {}

        def cuts_here(op: RecordedOp) -> bool:
            carried = _carried(recording, op, backward, end_ids)
            cut_of[op] = op_cut(op, carried, no_gradient=True)
            return cut_of[op] is not None

        first = _forward(recording, starts, backward, stop_at=cuts_here)
        return [cut for op in first if (cut := cut_of[op]) is not None]
    on_path = _forward(recording, starts, backward)
    found = [cut for op in on_path if (cut := op_cut(op, none=none)) is not None]
    definite = [cut for cut in found if cut.kind != "piecewise-constant"]
    return definite or found

