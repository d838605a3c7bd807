"""Where a NaN or an infinity comes from: the first op, forward or in the backward pass, that
turns finite values into non-finite ones, named as the forward op the user wrote, and
whether it sits in a tf.where branch that is not taken there. Facts only;
diagnosis/non_finite.py words them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gradcheck.engine import recorded
from gradcheck.engine.arrays import as_array
from gradcheck.engine.program import Program, flatten_outputs
from gradcheck.engine.runtime import silenced_stderr_fd, tensorflow
from gradcheck.evidence import Location
from gradcheck.evidence.causes.sources import Change, Source, Trial, UnboundedRecurrence
from gradcheck.forensics.provenance import Candidate, sources
from gradcheck.forensics.site_lines import running_layer_line
from gradcheck.forensics.values import (
    TracedValues,
    library_of,
    not_finite,
    op_location,
    trace_values,
)
from gradcheck.load.locations import innermost_user_frame
from gradcheck.user_code import is_gradcheck_file

SELECT_OPS = frozenset({"Select", "SelectV2"})
# Ops that only pass values on: a NaN they output came in through an input.
_CONTROL_FLOW = frozenset({"If", "StatelessIf", "While", "StatelessWhile", "PartitionedCall",
                           "StatefulPartitionedCall"})
# What a traced loop's result passes through: a NaN seen first there was made in its body.
_LOOP_RESULTS = frozenset({"TensorListStack", "TensorListGetItem", "TensorListPopBack",
                           "TensorListConcatV2", "While", "StatelessWhile", "Exit"})


@dataclass(frozen=True)
class Branch:
    """The tf.where whose branch the origin feeds, and whether that branch is not taken at
    the non-finite elements (so its zero mask times an infinity gives NaN)."""

    location: Location | None
    untaken: bool
    library: str | None = None  # the package whose code has the tf.where, not the user's


@dataclass(frozen=True)
class OriginOp:
    """One op that made non-finite values out of finite ones."""

    op_name: str  # the graph op's name
    op: str  # the forward op the user wrote: Sqrt, Log, RealDiv...
    scope: str  # the TensorFlow function it belongs to (norm for tf.norm), or ""
    location: Location | None
    backward: bool  # True: its gradient produced the value; False: its own output
    produced: str  # "NaN", "inf" or "-inf"
    arguments: tuple[float, ...]  # the forward op's float inputs at the first such element
    branch: Branch | None
    kernel: str  # the graph op that produced it (SqrtGrad, Reciprocal, Log...)
    second: bool = False  # made while differentiating the gradient (a second derivative)
    # What feeds the op, through ops that only pass values on: Softmax, Sigmoid, "1+Exp" (the
    # patterns a stable primitive replaces), or the name of f's argument it is ("y").
    fed_by: str = ""
    # Where its argument comes from when that is the cause (a batch feature, a fill...), with
    # the fixes tried at the point.
    source: Source | None = None


@dataclass(frozen=True)
class NonFiniteValue:
    """An output of f, or a gradient, with NaN or infinite elements."""

    name: str
    gradient: bool
    produced: str
    count: int
    size: int
    index: tuple[int, ...] | None
    origins: tuple[OriginOp, ...]


@dataclass(frozen=True)
class NonFiniteAnalysis:
    values: tuple[NonFiniteValue, ...]
    seconds: float
    jit: bool
    # The dtype the graph ran in, when it is not the checked one (f traces only in it).
    dtype: str | None = None
    order: int = 1  # 2: the gradients analysed are second derivatives (a Hessian times ones)


def _describe(array: np.ndarray) -> str:
    if np.any(np.isnan(array)):
        return "NaN"
    return "inf" if np.any(array[np.isinf(array)] > 0) else "-inf"


def _origin_ops(traced: TracedValues, tensor: Any) -> list[Any]:
    """Ops upstream of `tensor` with non-finite outputs and only finite inputs, in graph order."""
    found: dict[str, Any] = {}
    seen: set[str] = set()
    stack = [tensor.op]
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        bad_inputs = [t for t in op.inputs if traced.bad(t)]
        if bad_inputs:
            stack += [t.op for t in bad_inputs]
        else:
            found[op.name] = op
    return sorted(found.values(), key=lambda op: traced.index[op.name])


def _first_bad(array: np.ndarray) -> tuple[int, ...]:
    flat = int(np.argmax(~np.isfinite(array.reshape(-1))))
    return tuple(int(i) for i in np.unravel_index(flat, array.shape)) if array.ndim else ()


def _at_first_bad(values: Iterable[np.ndarray | None], bad: np.ndarray) -> tuple[float, ...]:
    """An op's float inputs at the first non-finite element of `bad` (none when the op is not
    elementwise)."""
    found = []
    for value in values:
        if value is None or value.dtype == bool:
            continue
        try:
            value = np.broadcast_to(value, bad.shape)
        except ValueError:
            return ()
        found.append(float(np.real(value[_first_bad(bad)])))
    return tuple(found)


def _arguments(traced: TracedValues, forward: Any, bad: np.ndarray) -> tuple[float, ...]:
    """The forward op's float inputs at the first non-finite element of `bad`."""
    return _at_first_bad((traced.value(tensor) for tensor in forward.inputs), bad)


def _branch(traced: TracedValues, forward: Any, bad: np.ndarray) -> Branch | None:
    """The first tf.where downstream of `forward` that it reaches through a branch."""
    frontier = [forward]
    seen: set[str] = set()
    while frontier:
        op = frontier.pop(0)
        for out in op.outputs:
            for consumer in traced.consumers(out):
                if consumer.name in seen or consumer.name not in traced.index \
                        or traced.is_backward(consumer):
                    continue
                seen.add(consumer.name)
                frontier.append(consumer)
                if consumer.type not in SELECT_OPS or out is consumer.inputs[0]:
                    continue
                branch = _select_branch(traced, consumer, out is consumer.inputs[1], bad)
                if branch is not None:
                    return branch
    return None


def _select_branch(traced: TracedValues, select: Any, first: bool,
                   bad: np.ndarray) -> Branch | None:
    condition = traced.value(select.inputs[0])
    result = traced.value(select.outputs[0])
    if condition is None or result is None:
        return None
    taken = np.broadcast_to(condition if first else ~condition, result.shape)
    if taken.all():
        return None
    mask = ~np.isfinite(bad)
    untaken = bool(not taken[mask].any()) if mask.shape == taken.shape else True
    return Branch(op_location(select), untaken, library_of(select))


# Ops that hand a value on unchanged in what matters here (its sign, its range).
_PASSING = frozenset({"Identity", "IdentityN", "Cast", "Reshape", "ExpandDims", "Squeeze",
                      "StridedSlice", "ReadVariableOp", "Snapshot", "GatherV2"})


def _fed_by(traced: TracedValues, forward: Any, arguments: Mapping[str, np.ndarray]) -> str:
    """What feeds `forward`'s argument (a division's denominator, xlogy's y), through ops that
    only pass it on."""
    inputs = [t for t in forward.inputs if t.dtype.is_floating]
    if not inputs:
        return ""
    tensor = _passed_on(
        inputs[-1] if forward.type in ("Xlogy", "RealDiv", "Div", "DivNoNan") else inputs[0])
    op = tensor.op
    producers = [_passed_on(t).op.type for t in op.inputs]
    if op.type in ("Softmax", "Sigmoid"):
        return str(op.type)
    if op.type in ("AddV2", "Add") and "Exp" in producers:
        return "1+Exp"
    if op.type == "Sub" and producers[1:2] == ["Sigmoid"]:
        return "1-Sigmoid"  # log(1 - sigmoid(z))
    if _linear(tensor):  # a Dense layer's output (plus constants), unbounded
        regression = any(name in _LABEL_NAMES and array.dtype.kind == "f"
                         and not np.all(np.isin(array, (0.0, 1.0)))
                         for name, array in arguments.items())
        return "linear-regression" if regression else "linear"
    if op.type in ("Const", "Placeholder"):
        value = traced.value(tensor)
        return next((name for name, array in arguments.items() if value is not None
                     and array.shape == value.shape
                     and np.allclose(array, value, equal_nan=True)), "")
    return ""


_LABEL_NAMES = frozenset({"y", "y_true", "labels", "label", "target", "targets"})


def _linear(tensor: Any, depth: int = 3) -> bool:
    """A matmul's result, through bias and constant additions (a Dense layer's output, y + 1)."""
    op = _passed_on(tensor).op
    if op.type == "MatMul":
        return True
    return depth > 0 and op.type in ("AddV2", "Add", "BiasAdd", "Sub") and any(
        _linear(t, depth - 1) for t in op.inputs)


def _passed_on(tensor: Any) -> Any:
    """The tensor whose value `tensor` hands on unchanged (through Identity, Cast...)."""
    while tensor.op.type in _PASSING and tensor.op.inputs:
        tensor = tensor.op.inputs[0]
    return tensor


def _origin(traced: TracedValues, op: Any, arguments: Mapping[str, np.ndarray]) -> OriginOp:
    forward = traced.forward_op(op)
    traced.prefetch(_read_around(op, traced))
    value = traced.value(op.outputs[0]) if op.outputs else None
    bad = value if value is not None else np.asarray(np.nan)
    named = forward if forward is not None else op
    location = op_location(op) or (op_location(forward) if forward is not None else None) \
        or (_gradient_source(traced, op) if op.type == "Cast" else None)
    scope = named.name.rsplit("/", 1)[0] if "/" in named.name else ""
    if scope.startswith("gradient_tape"):
        scope = ""
    return OriginOp(
        op_name=op.name, op=named.type, scope=scope, location=location,
        backward=traced.is_backward(op),
        produced=_describe(bad), kernel=op.type,
        arguments=_arguments(traced, forward, bad) if forward is not None else (),
        branch=_branch(traced, forward, bad) if forward is not None else None,
        second=traced.order(op) == 2,
        fed_by=_fed_by(traced, forward, arguments) if forward is not None else "")


def _gradient_source(traced: TracedValues, cast: Any) -> Location | None:
    """A library's cast of a gradient to a lower precision that overflows (float16's 65504):
    the user's line nearest upstream in the backward pass, where the gradient grew so large
    (a loss multiplied by a large constant)."""
    if not traced.is_backward(cast):
        return None
    frontier, seen = [t.op for t in cast.inputs], set()
    while frontier:
        op = frontier.pop(0)
        if op.name in seen or op.name not in traced.index or not traced.is_backward(op):
            continue
        seen.add(op.name)
        forward = traced.forward_op(op)
        location = op_location(op) or (op_location(forward) if forward is not None else None)
        if location is not None:
            return location
        frontier += [t.op for t in op.inputs]
    return None


def _value(traced: TracedValues, name: str, tensor_name: str, gradient: bool,
           arguments: Mapping[str, np.ndarray], trials: dict[Any, Trial | None],
           origin_ops: Sequence[Any]) -> NonFiniteValue:
    origins: dict[tuple[str, Location | None, bool], OriginOp] = {}
    for op in origin_ops:
        found = _origin(traced, op, arguments)
        origins.setdefault((found.op, found.location, found.backward), found)
    ordered = list(origins.values())
    if ordered:
        ordered[0] = _with_source(traced, ordered[0], arguments, trials)
    summary = traced.summaries.get(tensor_name)
    if summary is not None:
        return NonFiniteValue(name, gradient, summary.produced, summary.count, summary.size,
                              summary.first or None, tuple(ordered))
    array = traced.value(traced.tensor(tensor_name))
    assert array is not None
    mask = ~np.isfinite(array)
    return NonFiniteValue(name, gradient, _describe(array), int(mask.sum()), int(array.size),
                          _first_bad(array) or None, tuple(ordered))


def _explained_ops(traced: TracedValues, tensor: Any) -> list[Any]:
    """The origin ops of a non-finite tensor that an OriginOp describes (not a control-flow
    op that stands for no forward op)."""
    return [op for op in _origin_ops(traced, tensor)
            if op.type not in _CONTROL_FLOW or traced.forward_op(op) is not None]


def _read_around(op: Any, traced: TracedValues) -> list[Any]:
    """The tensors `_origin` reads for an op: its outputs, its forward op's inputs and outputs."""
    forward = traced.forward_op(op)
    return [*op.outputs, *(forward.inputs if forward is not None else ()),
            *(forward.outputs if forward is not None else ())]


# How many sources are tried (each trial runs the graph once more).
_TRIALS = 3


def _with_source(traced: TracedValues, origin: OriginOp, arguments: Mapping[str, np.ndarray],
                 trials: dict[Any, Trial | None]) -> OriginOp:
    """The origin with the source of its argument, each changeable source's fix tried (once
    per analysis: `trials`, by change): the first that makes every output and gradient
    finite, else the first found."""
    if origin.op_name not in traced.index:
        return origin
    op = traced.ops[traced.index[origin.op_name]]
    forward = traced.forward_op(op)
    if forward is None:
        return origin
    value = traced.value(forward.outputs[0]) if forward.outputs else None
    if value is None or traced.is_backward(op):
        value = traced.value(op.outputs[0]) if op.outputs else None
    candidates = sources(traced, forward, value if value is not None else np.asarray(np.nan),
                         arguments)
    if not candidates:
        return origin
    tried = []
    for candidate in candidates[:_TRIALS]:
        key = (candidate.trial, tuple((name, value.dtype.str, value.shape, value.tobytes())
                                      for name, value in sorted(candidate.feeds.items())))
        if key not in trials:
            trials[key] = _trial(traced, candidate)
        tried.append((candidate, trials[key]))
    chosen, trial = next(((c, t) for c, t in tried if t is not None and t.repaired), tried[0])
    return replace(origin, source=chosen.source.with_trials((trial,) if trial else ()))


def _trial(traced: TracedValues, candidate: Candidate) -> Trial | None:
    """The candidate's change applied to the graph: whether f and its gradients are finite."""
    if not candidate.feeds or candidate.trial is None or traced.rerun is None:
        return None
    try:
        finite, largest = traced.rerun(candidate.feeds)
    except Exception:  # noqa: BLE001 - a change the graph cannot take is not tried
        return None
    return replace(candidate.trial, repaired=finite, largest=largest)


def analyse_non_finite(program: Program, output_indices: Sequence[int] | None,
                       jit: bool = False, order: int = 1) -> NonFiniteAnalysis | None:
    """Every non-finite output and gradient of f at the point (second derivatives, with
    `order` 2), with its origins; None when f cannot be traced into a graph. Outputs: those
    at `output_indices`, or (None) f's differentiable ones."""
    traced, dtype = trace_values(program, output_indices, jit=jit, order=order,
                                 on_demand=True), None
    own = {s.own_dtype for s in program.sources if s.argument and s.own_dtype != s.dtype}
    if traced is None and len(own) == 1 and None not in own:  # a literal meeting float64
        traced = trace_values(program, output_indices, jit=jit, own_dtype=True, order=order,
                              on_demand=True)
        dtype = own.pop()
    if traced is None:
        return None
    try:
        return _analysed(program, traced, jit, dtype, order)
    finally:
        traced.close()


def _analysed(program: Program, traced: TracedValues, jit: bool, dtype: str | None,
              order: int) -> NonFiniteAnalysis:
    arguments = dict(_named_arrays((slot.name, slot.value) for slot in program.slots
                                   if slot.argument and not slot.differentiable))
    named = [(name, tensor, False) for name, tensor in traced.outputs] + [
        (name, tensor, True) for name, tensor in traced.gradients if tensor is not None]
    bad = [(name, tensor, gradient, _explained_ops(traced, traced.tensor(tensor)))
           for name, tensor, gradient in named if traced.bad(traced.tensor(tensor))]
    # What every value's description reads, fetched in one run of the graph.
    traced.prefetch([*(traced.tensor(tensor) for _, tensor, _, _ in bad
                       if tensor not in traced.summaries),
                     *(t for *_, ops in bad for op in ops for t in _read_around(op, traced))])
    trials: dict[Any, Trial | None] = {}
    found = []
    for name, tensor, gradient, ops in bad:
        value = _value(traced, name, tensor, gradient, arguments, trials, ops)
        found.append(value if gradient else _made_in_a_loop(program, value))
    return NonFiniteAnalysis(tuple(found), traced.seconds, jit, dtype, order)


def _named_arrays(named: Iterable[tuple[str, Any]]) -> Iterable[tuple[str, np.ndarray]]:
    """f's array arguments by name, a list or dict of them (a multi-input batch) as name/key."""
    for name, value in named:
        if isinstance(value, (list, tuple)):
            yield from _named_arrays((f"{name}/{k}", v) for k, v in enumerate(value))
        elif isinstance(value, dict):
            yield from _named_arrays((f"{name}/{k}", v) for k, v in value.items())
        elif value is not None and not callable(value) and hasattr(value, "dtype"):
            yield name, np.asarray(as_array(value))


def _float_array(tensor: Any) -> np.ndarray | None:
    dtype = getattr(tensor, "dtype", None)
    if dtype is None or not (dtype.is_floating or dtype.is_complex):
        return None
    return as_array(tensor)


def _eager_origins(program: Program) -> tuple[OriginOp, ...]:
    """The op f runs eagerly that first makes non-finite values out of finite ones: inside a
    loop's body (a Keras RNN's cell), which its traced graph shows only as the loop's result.
    f runs only until that op."""
    op = recorded.first_non_finite_op(program)
    if op is None:
        return ()
    inputs = [a for t in op.inputs if (a := _float_array(t)) is not None]
    made = next(a for t in op.outputs if (a := _float_array(t)) is not None and not_finite(a))
    frames = list(op.traceback)
    ours = [i for i, frame in enumerate(frames) if is_gradcheck_file(frame.filename)]
    location = innermost_user_frame(frames[ours[-1] + 1:] if ours else frames) or \
        running_layer_line(op.layers)
    return (OriginOp(op_name="", op=op.type, scope=op.scope, location=location, backward=False,
                     produced=_describe(made), arguments=_at_first_bad(inputs, made),
                     branch=None, kernel=op.type,
                     source=_recurrence(program, op.layers, location)),)


# Activations that keep a recurrent state bounded.
_BOUNDED = frozenset({"tanh", "sigmoid", "hard_sigmoid", "softsign"})


def _recurrence(program: Program, layers: Sequence[Any],
                location: Location | None) -> UnboundedRecurrence | None:
    """The innermost running recurrent layer whose activation leaves its state unbounded, with
    the step's loss run again with tanh in its place (put back afterwards)."""
    layer = next((layer for layer in reversed(layers) if hasattr(layer, "cell")
                  and hasattr(layer.cell, "activation")), None)
    if layer is None:
        return None
    cell = layer.cell
    activation = getattr(cell.activation, "__name__", str(cell.activation))
    if activation in _BOUNDED:
        return None
    kept = cell.activation
    try:
        cell.activation = tensorflow().math.tanh
        with silenced_stderr_fd():
            finite = all(_finite(leaf.tensor) for leaf in flatten_outputs(program.call()))
        trial: tuple[Trial, ...] = (Trial(Change.BOUNDED_ACTIVATION, finite, subject=layer.name,
                                          loss_only=True),)
    except Exception:  # noqa: BLE001 - a layer that cannot take it is not tried
        trial = ()
    finally:
        cell.activation = kept
    return UnboundedRecurrence(trials=trial, layer=layer.name, kind=type(layer).__name__,
                               activation=activation, at=location)


def _finite(tensor: Any) -> bool:
    array = _float_array(tensor)
    return array is None or bool(np.all(np.isfinite(array)))


def _made_in_a_loop(program: Program, value: NonFiniteValue) -> NonFiniteValue:
    """An output whose NaN the graph traces only to a loop's result, with its origins found
    where f runs the loop's body eagerly."""
    if value.gradient or not value.origins or any(
            origin.kernel not in _LOOP_RESULTS for origin in value.origins):
        return value
    return replace(value, origins=_eager_origins(program) or value.origins)


def eager_non_finite(program: Program) -> tuple[list[int], bool]:
    """f's differentiable outputs, and whether f or its VJP (all-ones upstreams) has a NaN or
    an infinity at the point: one eager call."""
    tf = tensorflow()
    sources = [slot.value for slot in program.sources]
    with silenced_stderr_fd(), tf.GradientTape() as tape:
        for source in sources:
            tape.watch(source)
        leaves = flatten_outputs(program.call())
    outputs = [k for k, leaf in enumerate(leaves) if leaf.differentiable]
    targets = [leaves[k].tensor for k in outputs]
    try:
        with silenced_stderr_fd():
            grads = tape.gradient(targets, sources,
                                  output_gradients=[tf.ones_like(t) for t in targets])
    except Exception:  # the checks report what raises
        return outputs, False
    arrays = [as_array(t) for t in targets] + [
        as_array(tf.convert_to_tensor(g)) for g in grads if g is not None]
    return outputs, any(not_finite(a) for a in arrays)
