"""TensorFlow's own gaps, found in f's traced graph: ops without a forward-mode rule, gradient
ops without a gradient (no second derivative), half precision computed inside f."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.engine.observer import forward_mode
from gradcheck.engine.program import Program, flatten_outputs
from gradcheck.engine.runtime import tensorflow
from gradcheck.engine.traces import remembered
from gradcheck.evidence import Location
from gradcheck.forensics.cut_ops import CutSite, frames_location, has_gradient, op_cut
from gradcheck.forensics.graph import (
    _graph_of,
    _reachable_forward,
    _starts,
    _trace,
    ops_feeding,
)

LOW_PRECISION = ("bfloat16", "float16")
# A while loop (tf.while_loop, a recurrent layer): where tape.jacobian's pfor has gaps.
WHILE_OPS = frozenset({"While", "StatelessWhile"})
# Ops that custom gradients and forward mode add around the user's: never a forward-mode gap.
PASS_THROUGH_OPS = frozenset({"Identity", "IdentityN", "PartitionedCall",
                              "StatefulPartitionedCall"})


@dataclass(frozen=True)
class MissingSecondOrder:
    """A gradient op TensorFlow registers no gradient for (`gradient_op`: ResizeBilinearGrad),
    made for the user's `op` (ResizeBilinear) at `location`."""

    gradient_op: str
    op: str
    location: Location | None


@dataclass(frozen=True)
class Inside:
    """What f's traced graph holds on the way to its outputs: its lowest float precision
    (float16, bfloat16 or None) and whether it runs a while loop (in a function it calls too:
    a recurrent layer, a restored SavedModel's LSTM)."""

    lowest: str | None = None
    loops: bool = False


def lowest_precision_inside(program: Program) -> str | None:
    """float16 or bfloat16 when f computes in it on the way to its outputs (the mixed-precision
    recipe: half precision inside, float32 outputs), else None (also when f cannot be traced);
    traced once for every call with the same f, shapes and dtypes."""
    return _inside(program).lowest


def loops_inside(program: Program) -> bool:
    """Whether f runs a while loop (tf.while_loop, a recurrent layer), in its own graph or a
    function it calls; False when f cannot be traced."""
    return _inside(program).loops


def _inside(program: Program) -> Inside:
    return remembered(program, "inside", lambda: _traced_inside(program))


def _traced_inside(program: Program) -> Inside:
    index = next((i for i, s in enumerate(program.slots) if s.differentiable), None)
    if index is None:
        return Inside()
    try:
        graph = _graph_of(program.call, program, index)
    except Exception:  # not traceable: judged by its outputs' dtype, as before
        return Inside()
    dtypes = {t.dtype.name for op in ops_feeding(graph.outputs) for t in op.outputs}
    types = {op.type for op in graph.get_operations()}
    for function in getattr(graph, "_functions", {}).values():
        definition = getattr(function, "cached_definition", None) or getattr(
            function, "definition", None)
        types.update(node.op for node in getattr(definition, "node_def", ()))
    return Inside(next((d for d in LOW_PRECISION if d in dtypes), None),
                  bool(types & WHILE_OPS))


def _forward_graph(program: Program, slot_index: int) -> tuple[Any, set[str]] | None:
    """f traced under a ForwardAccumulator: its graph and the names of the tensors that carry
    a tangent; None when f cannot be traced."""
    tf = tensorflow()
    slot = program.slots[slot_index]
    carried: set[str] = set()

    def leaves(result: Any) -> list[Any]:
        return [leaf.tensor for leaf in flatten_outputs(result) if leaf.differentiable]

    def traced(point: Any) -> list[Any]:
        ones = tf.ones_like(point)
        with forward_mode(), tf.autodiff.ForwardAccumulator(point, ones) as accumulator:
            outputs = leaves(program.call({slot_index: point}))
        for op in tf.compat.v1.get_default_graph().get_operations():
            carried.update(t.name for t in op.outputs if t.dtype.is_floating
                           and accumulator.jvp(t) is not None)
        return outputs

    try:
        graph = tf.function(traced, autograph=False).get_concrete_function(
            tf.TensorSpec(slot.shape, slot.dtype)).graph
    except Exception:  # not traceable: no op to name
        return None
    return graph, carried


def forward_mode_gaps(program: Program, slot_index: int) -> list[CutSite]:
    """Ops on the path from an argument that reverse mode differentiates but forward mode
    (tf.autodiff.ForwardAccumulator) gives no tangent: a tangent goes in, none comes out."""
    if program.slots[slot_index].is_variable:
        return []
    traced = _forward_graph(program, slot_index)
    if traced is None:
        return []
    graph, carried = traced
    backward = ops_feeding(graph.outputs)
    gaps: list[CutSite] = []
    for op in graph.get_operations():
        floats_out = [t for t in op.outputs if t.dtype.is_floating]
        if op not in backward or not floats_out or op.type in PASS_THROUGH_OPS \
                or op.name.startswith("gradient_tape"):
            continue  # a custom_gradient's or forward mode's own ops: the user's grad_fn decides
        if not any(t.name in carried for t in op.inputs) or any(
                t.name in carried for t in floats_out):
            continue
        location = frames_location(op.traceback)
        if location is not None and op_cut(op) is None:
            gaps.append(CutSite("no-forward-rule", location, op.type))
    return gaps


def _forward_op_of(graph: Any, gradient_op: Any) -> Any:
    """The forward op a gradient op was made for, by name ("gradient_tape/resize/
    ResizeBilinearGrad" for "resize/ResizeBilinear"); None if not found."""
    scope = gradient_op.name.split("/", 1)[-1].rsplit("/", 1)[0] + "/"
    wanted = gradient_op.type.removesuffix("Grad")
    candidates = [op for op in graph.get_operations()
                  if op.name.startswith(scope) and not op.name.startswith("gradient_tape")]
    return next((op for op in candidates if op.type == wanted),
                candidates[-1] if candidates else None)


def second_order_gaps(program: Program, slot_index: int) -> list[MissingSecondOrder]:
    """In the traced gradient g of f (a nested-tape program), the gradient ops with no
    gradient registered in TensorFlow (ResizeBilinearGrad...), each at its forward op's line."""
    graph, _, _ = _trace(program, slot_index)
    if graph is None:
        return []
    starts = _starts(graph, program.slots[slot_index])
    forward = _reachable_forward(starts)
    backward = ops_feeding(graph.outputs)
    gaps: list[MissingSecondOrder] = []
    for op in graph.get_operations():
        if op in forward and op in backward and not has_gradient(op):
            source = _forward_op_of(graph, op)
            location = frames_location(source.traceback) if source is not None else None
            gaps.append(MissingSecondOrder(
                op.type, source.type if source is not None else op.type, location))
    return gaps


def missing_gradient_of(error: str) -> str | None:
    """The gradient op TensorFlow says has no gradient ("gradient registry has no entry for:
    ResizeNearestNeighborGrad", "No gradient defined for operation ... (op type: X)")."""
    for marker in ("gradient registry has no entry for: ", "(op type: "):
        if marker in error:
            return error.split(marker, 1)[1].split(")")[0].split()[0].strip("'\".,")
    return None


def forward_op_location(program: Program, slot_index: int,
                        gradient_type: str) -> tuple[str, Location | None] | None:
    """The user's op whose gradient op is `gradient_type` (CropAndResize for
    CropAndResizeGradBoxes), and its line, in f traced; None when f has no such op."""
    base = gradient_type.split("Grad")[0]
    graph, _, _ = _trace(program, slot_index)
    if graph is None or not base:
        return None
    op = next((op for op in graph.get_operations() if op.type == base), None)
    return None if op is None else (op.type, frames_location(op.traceback))


def forward_non_finite_site(program: Program, slot_index: int, tangent: Any
                            ) -> tuple[str, Location | None] | None:
    """The first op of f whose forward-mode tangent (along `tangent`) is NaN or infinite while
    its value and the tangents going into it are finite, and its line: where TensorFlow's
    forward-mode rule breaks (segment_mean's with an empty segment); None when f cannot be
    traced or no such op is found."""
    tf = tensorflow()
    slot = program.slots[slot_index]
    if slot.is_variable:
        return None
    names: list[Any] = []

    def traced(point: Any, direction: Any) -> list[Any]:
        with forward_mode(), tf.autodiff.ForwardAccumulator(point, direction) as accumulator:
            program.call({slot_index: point})
        pairs = []
        for op in tf.compat.v1.get_default_graph().get_operations():
            for t in op.outputs:
                jvp = accumulator.jvp(t) if t.dtype.is_floating else None
                if jvp is not None:
                    names.append(op)
                    pairs += [t, tf.convert_to_tensor(jvp)]
        return pairs

    spec = tf.TensorSpec(slot.shape, slot.dtype)
    try:
        concrete = tf.function(traced, autograph=False).get_concrete_function(spec, spec)
        values = concrete(slot.value, tf.constant(tangent, dtype=slot.dtype))
    except Exception:  # not traceable, or not runnable as traced: no op to name
        return None
    finite = True
    for op, value, jvp in zip(names, values[::2], values[1::2]):
        jvp_finite = bool(np.all(np.isfinite(jvp.numpy())))
        if finite and not jvp_finite and np.all(np.isfinite(value.numpy())) \
                and op.type not in PASS_THROUGH_OPS:
            return op.type, frames_location(op.traceback)
        finite = finite and jvp_finite
    return None
