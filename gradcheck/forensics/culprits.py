"""The op behind a finding, at the user's line: the stateful op that makes f random, the op
XLA cannot compile, the op whose kink the point sits on. Facts only; checks word them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gradcheck.engine.neighbourhood import moved_program
from gradcheck.engine.program import Program
from gradcheck.engine.runtime import tensorflow
from gradcheck.evidence import Location
from gradcheck.forensics.op_types import SPECTRAL, VARIABLE_WRITE_OPS, spectral_gap
from gradcheck.forensics.site_lines import layer_line
from gradcheck.forensics.values import TracedValues, op_location, trace_values

_RANDOM = re.compile(r"Random|TruncatedNormal|Multinomial|StatefulUniform|StatefulStandard"
                     r"|StatefulTruncated|RngReadAndSkip|RngSkip")
# Ops with a kink at 0 of their (first) input, and those with one where two inputs tie.
KINK_AT_ZERO = frozenset({"Abs", "Relu", "LeakyRelu", "Relu6", "Sign"})
COMPARISONS = frozenset({"Greater", "GreaterEqual", "Less", "LessEqual"})
KINK_AT_TIE = frozenset({"Maximum", "Minimum"}) | COMPARISONS
# Reductions with a kink where two of the elements they reduce tie for the extreme
# (tf.reduce_max, tf.reduce_min): the op picks the largest (True) or smallest.
REDUCTION_TIES = {"Max": True, "Min": False}
# Decompositions with a kink where two of their values coincide (sorted eigenvalues cross; the
# vectors of a repeated value are not unique, so f may jump there).
SPECTRAL_TIES = frozenset(SPECTRAL)
# Ops whose value jumps: across the negative real axis of a complex input (the branch cut of
# angle, log, sqrt), at atan2(y, x) with y = 0 < -x, and where floormod wraps.
BRANCH_CUT = frozenset({"Angle", "Log", "Sqrt", "Rsqrt", "Pow", "Atan", "Atan2", "FloorMod"})
# How close to the kink an input must be for finite differences (steps ~1e-5) to cross it.
KINK_REACH = 1e-4
# The frame of tf.recompute_grad's backward pass that runs f again.
_RECOMPUTE_FRAME = "inner_recompute_grad"
# How many function graphs are searched for it.
_MAX_GRAPHS = 64
_NODE = re.compile(r"\{\{node ([^}]+)\}\}")
# An HLO instruction as XLA errors print it: %MaxPoolGrad.7 (the TensorFlow op type it lowers).
_HLO_NAME = re.compile(r"%([A-Z][A-Za-z0-9]*)\.\d+")
# Backward ops whose GPU kernels may give another result on every run: atomic additions
# (scatter, segment sums: the gradients of gather and embedding lookups), cuDNN's filter
# gradients, TF32 matmuls; tf.config.experimental.enable_op_determinism() makes them repeat.
GPU_NONDETERMINISTIC = frozenset({
    "UnsortedSegmentSum", "SegmentSum", "ScatterNd", "TensorScatterAdd", "ResourceScatterAdd",
    "BiasAddGrad", "Conv2DBackpropFilter", "Conv3DBackpropFilterV2", "ResizeBilinearGrad",
    "ResizeNearestNeighborGrad", "MaxPoolGrad", "MatMul", "BatchMatMulV2", "BatchMatMulV3",
    "SparseSoftmaxCrossEntropyWithLogits", "CTCLoss"})


@dataclass(frozen=True)
class OpSite:
    """One op, named as the user wrote it (the forward op), at the user's line."""

    op: str
    scope: str
    location: Location | None
    tie: bool = False  # a kink where two inputs tie (Maximum, Minimum, a comparison), not at 0
    backward: bool = False  # the op is part of the gradient of the forward op named

    @property
    def name(self) -> str:
        return f"{self.op} (inside {self.scope})" if self.scope else self.op


def _site(traced: TracedValues, op: Any, tie: bool = False) -> OpSite:
    forward = traced.forward_op(op) if op.name in traced.index else None
    named = forward if forward is not None else op
    scope = named.name.rsplit("/", 1)[0] if "/" in named.name else ""
    location = op_location(op) or (op_location(forward) if forward is not None else None)
    return OpSite(named.type, "" if scope.startswith("gradient_tape") else scope, location, tie,
                op.name in traced.index and traced.is_backward(op))


def stateful_sites(program: Program, output_indices: Sequence[int]) -> list[OpSite]:
    """Random ops and variable writes in f's traced graph (what makes two calls differ)."""
    traced = trace_values(program, output_indices, gradients=False, execute=False)
    if traced is None:
        return []
    return [_site(traced, op) for op in traced.ops
            if op.type in VARIABLE_WRITE_OPS or _RANDOM.search(op.type)]


def recomputed_random_sites(program: Program, output_indices: Sequence[int]) -> list[OpSite]:
    """Random ops that tf.recompute_grad runs again in f's backward pass (its recomputation
    draws new numbers: the gradient is of another sample than the value)."""
    traced = trace_values(program, output_indices, execute=False)
    if traced is None:
        return []
    found = [_site(traced, op) for op in traced.ops if traced.is_backward(op)
             and _RANDOM.search(op.type) and _recomputed(op)]
    # Under a tf.function of the user's own, the recomputation is in its gradient function.
    return found or [_site(traced, op) for op in _called_ops(traced.ops)
                     if _RANDOM.search(op.type) and _recomputed(op)]


def _called_ops(ops: Sequence[Any]) -> list[Any]:
    """The ops of the functions that f's graph calls, however deep (up to _MAX_GRAPHS)."""
    if not ops:
        return []
    found: list[Any] = []
    pending = [f.graph for f in getattr(ops[0].graph, "_functions", {}).values()
               if getattr(f, "graph", None) is not None]
    seen = 0
    while pending and seen < _MAX_GRAPHS:
        graph = pending.pop()
        seen += 1
        found += graph.get_operations()
        pending += [f.graph for f in getattr(graph, "_functions", {}).values()
                    if getattr(f, "graph", None) is not None]
    return found


def _recomputed(op: Any) -> bool:
    return any(frame.name == _RECOMPUTE_FRAME and frame.filename.endswith("custom_gradient.py")
               for frame in op.traceback or ())


def is_random_op(op_type: str) -> bool:
    return bool(_RANDOM.search(op_type))


def backward_nondeterministic_sites(program: Program, output_indices: Sequence[int]
                                    ) -> list[OpSite]:
    """The ops of f's traced VJP that make it differ between runs: random ops in a gradient
    (a grad_fn's), then ops whose GPU kernels are nondeterministic."""
    traced = trace_values(program, output_indices, execute=False)
    if traced is None:
        return []
    backward = [op for op in traced.ops if traced.is_backward(op)]
    return ([_site(traced, op) for op in backward if _RANDOM.search(op.type)]
            + [OpSite(op.type, "", op_location(op), backward=True) for op in backward
               if op.type in GPU_NONDETERMINISTIC])


def failing_node_site(program: Program, output_indices: Sequence[int],
                      message: str) -> OpSite | None:
    """The op a TensorFlow/XLA error names ({{node ...}}), found in f's traced VJP and named
    as the forward op whose gradient created it."""
    named = _NODE.search(message)
    if named is None:
        return _hlo_site(program, output_indices, message)
    traced = trace_values(program, output_indices, execute=False)
    if traced is None:
        return None
    parts = named.group(1).split("/")
    for end in range(len(parts), 0, -1):
        name = "/".join(parts[:end])
        if name in traced.index:
            return _site(traced, traced.ops[traced.index[name]])
    return None


def _hlo_site(program: Program, output_indices: Sequence[int], message: str) -> OpSite | None:
    """The op an XLA error names by its HLO instruction (`%MaxPoolGrad.7 = f16[...]
    select-and-scatter(%Relu.8, %ResizeBilinearGrad.163, ...)`), found in f's traced VJP by its
    type. When XLA saw mixed precisions, the operand that brings the other precision is a
    gradient op of another type than the instruction's: that one first."""
    types = list(dict.fromkeys(_HLO_NAME.findall(message)))
    if not types:
        return None
    traced = trace_values(program, output_indices, execute=False)
    if traced is None:
        return None
    if "different precisions" in message:
        types = [t for t in types[1:] if t.endswith("Grad")] + types[:1]
    for op_type in types:
        op = next((op for op in traced.ops if op.type == op_type), None)
        if op is None:
            continue
        site = _site(traced, op)
        if site.backward and traced.forward_op(op) is None:  # named after its forward op
            site = replace(site, op=op.type.removesuffix("Grad"))
        # Inside a Keras layer (the ops run in Keras' code): the line that constructed it.
        return site if site.location else replace(site, location=layer_line(op.name))
    return None


def _reduced(op: Any, values: np.ndarray) -> np.ndarray | None:
    """A reduction's input with the reduced axes flattened into the last one."""
    axes = tensorflow().get_static_value(op.inputs[1])
    if axes is None or values.ndim == 0:
        return None
    reduced = sorted({int(a) % values.ndim for a in np.atleast_1d(axes)})
    kept = [a for a in range(values.ndim) if a not in reduced]
    moved = np.transpose(values, kept + reduced)
    return moved.reshape(moved.shape[:len(kept)] + (-1,))


def _reduction_gap(traced: TracedValues, op: Any) -> float | None:
    """How close a tf.reduce_max (min) is to a tie for its extreme: the gap between the
    largest (smallest) two elements of any slice it reduces, relative to their scale."""
    found = traced.value(op.inputs[0])
    if found is None:
        return None
    slices = _reduced(op, np.asarray(found, dtype=np.float64))
    if slices is None or slices.shape[-1] < 2 or slices.size == 0:
        return None
    ordered = np.sort(slices, axis=-1)
    gaps = (ordered[..., -1] - ordered[..., -2] if REDUCTION_TIES[op.type]
            else ordered[..., 1] - ordered[..., 0])
    return float(np.min(gaps)) / max(1.0, float(np.max(np.abs(slices))))


def _distance_to_kink(traced: TracedValues, op: Any,
                      element: tuple[tuple[int, ...], tuple[int, ...]] | None) -> float | None:
    if op.type in REDUCTION_TIES:
        return _reduction_gap(traced, op)
    if op.type in SPECTRAL_TIES:
        spectrum = traced.value(op.outputs[SPECTRAL[op.type][0]])
        return None if spectrum is None else spectral_gap(spectrum)
    found = [traced.value(t) for t in op.inputs]
    values = [v for v in found if v is not None]
    if len(values) != len(found) or not values:
        return None
    if op.type in KINK_AT_ZERO:
        first = np.asarray(values[0], dtype=np.float64)
        scale = 1.0
        gaps = np.abs(first)
        if op.type == "Relu6":
            gaps = np.minimum(gaps, np.abs(first - 6.0))
    elif len(values) >= 2 and values[0].dtype != bool:
        a, b = (np.asarray(v, dtype=np.float64) for v in values[:2])
        try:
            gaps = np.abs(a - b)
        except ValueError:
            return None
        scale = max(1.0, float(np.max(np.abs(a), initial=0.0)), float(np.max(np.abs(b),
                                                                               initial=0.0)))
    else:
        return None
    if gaps.size == 0:
        return None
    if element is not None and gaps.shape == element[1]:
        return float(gaps[element[0]]) / scale  # an elementwise op on the input itself
    return float(np.min(gaps)) / scale


def _feeding(traced: TracedValues, output: str | None) -> set[str] | None:
    """The names of the ops the output leaf `output` is computed from (None: every op)."""
    tensor = next((name for leaf, name in traced.outputs if leaf == output), None)
    if tensor is None:
        return None
    start = tensor.rsplit(":", 1)[0]
    if start not in traced.index:
        return None
    seen: set[str] = set()
    stack = [traced.ops[traced.index[start]]]
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        stack += [t.op for t in op.inputs]
    return seen


def kink_site(program: Program, output_indices: Sequence[int],
              element: tuple[tuple[int, ...], tuple[int, ...]] | None = None,
              output: str | None = None) -> OpSite | None:
    """The op of f whose input sits (within finite differences' reach) on its kink: Abs or
    Relu at 0, a Maximum/Minimum, a tf.where comparison or a tf.reduce_max/min at a tie; the
    closest one (at the input's `element`, (index, shape), for ops on tensors of the input's
    shape) among the ops the output leaf `output` is computed from."""
    traced = trace_values(program, output_indices, gradients=False)
    if traced is None:
        return None
    feeding = _feeding(traced, output)
    best: tuple[float, Any] | None = None
    for op in traced.ops:
        if op.type not in KINK_AT_ZERO | KINK_AT_TIE | REDUCTION_TIES.keys() | SPECTRAL_TIES or (
                feeding is not None and op.name not in feeding):
            continue
        distance = _distance_to_kink(traced, op, element)
        if distance is not None and distance <= KINK_REACH and (
                best is None or distance < best[0]):
            best = (distance, op)
    if best is None:
        return None
    op = best[1]
    return _site(traced, op, tie=op.type not in KINK_AT_ZERO)


def _distance_to_jump(traced: TracedValues, op: Any) -> float | None:
    found = [traced.value(t) for t in op.inputs]
    if not found or any(v is None for v in found):
        return None
    values = [np.asarray(v) for v in found]
    if op.type == "Atan2":
        y, x = (v.astype(np.float64) for v in values[:2])
        gaps = np.where(x < 0, np.abs(y) / np.maximum(np.abs(x), 1e-300), np.inf)
    elif op.type == "FloorMod":
        quotient = values[0].astype(np.float64) / values[1].astype(np.float64)
        gaps = np.abs(quotient - np.round(quotient))
    elif op.type == "Atan" and np.iscomplexobj(values[0]):  # cut: the imaginary axis beyond ±i
        z = values[0].astype(np.complex128)
        gaps = np.where(np.abs(z.imag) > 1, np.abs(z.real) / np.maximum(np.abs(z), 1e-300), np.inf)
    elif np.iscomplexobj(values[0]):
        z = values[0].astype(np.complex128)
        gaps = np.where(z.real < 0, np.abs(z.imag) / np.maximum(np.abs(z), 1e-300), np.inf)
    else:
        return None
    return float(np.min(gaps)) if gaps.size else None


def jump_site(program: Program, output_indices: Sequence[int]) -> OpSite | None:
    """The op of f whose input sits (within finite differences' reach) on the line where its
    value jumps: a branch cut of a complex function, atan2's, floormod's wrap; else a
    comparison whose operands tie (a tf.where's condition: f switches branch there)."""
    traced = trace_values(program, output_indices, gradients=False)
    if traced is None:
        return None
    near = [(distance, op) for op in traced.ops if op.type in BRANCH_CUT
            for distance in [_distance_to_jump(traced, op)]
            if distance is not None and distance <= KINK_REACH]
    if near:
        return _site(traced, min(near, key=lambda pair: pair[0])[1])
    ties = [(distance, op) for op in traced.ops if op.type in COMPARISONS | SPECTRAL_TIES
            for distance in [_distance_to_kink(traced, op, None)]
            if distance is not None and distance <= KINK_REACH]
    return _site(traced, min(ties, key=lambda pair: pair[0])[1], tie=True) if ties else None


def crossed_kink_site(program: Program, output_indices: Sequence[int], slot_index: int,
                      element: int, reach: float, output: str | None = None) -> OpSite | None:
    """The first kink op of f that one input element, moved by ±reach, carries across its kink:
    a Relu-like op whose input changes sign, a Maximum/Minimum or comparison whose inputs swap,
    a MaxPool or tf.reduce_max/min whose maximum (minimum) moves to another element; among the
    ops the output leaf `output` is computed from."""
    ends = []
    for move in (-reach, reach):
        with moved_program(program, slot_index, element, move) as moved:
            ends.append(trace_values(moved, output_indices, gradients=False))
    low, high = ends
    if low is None or high is None or len(low.ops) != len(high.ops):
        return None
    feeding = _feeding(low, output)
    kinds = KINK_AT_ZERO | KINK_AT_TIE | REDUCTION_TIES.keys() | {"MaxPool"}
    for op, other in zip(low.ops, high.ops):
        if op.type in kinds and (feeding is None or op.name in feeding) and _crosses(
                op, low, other, high):
            return _site(low, op, tie=op.type not in KINK_AT_ZERO)
    return None


def _winner_moved(op: Any, before: np.ndarray | None, after: np.ndarray | None) -> bool:
    """A tf.reduce_max (min) whose extreme is another element on either side."""
    if before is None or after is None:
        return False
    low, high = (_reduced(op, np.asarray(v)) for v in (before, after))
    if low is None or high is None or low.shape != high.shape or low.size == 0:
        return False
    pick = np.argmax if REDUCTION_TIES[op.type] else np.argmin
    return bool(np.any(pick(low, axis=-1) != pick(high, axis=-1)))


def _crosses(op: Any, low: TracedValues, other: Any, high: TracedValues) -> bool:
    if op.type in REDUCTION_TIES:
        return _winner_moved(op, low.value(op.inputs[0]), high.value(other.inputs[0]))
    found = [low.value(t) for t in op.inputs] + [high.value(t) for t in other.inputs]
    if not op.inputs or any(v is None for v in found):
        return False
    values = [np.asarray(v) for v in found]
    before, after = values[:len(op.inputs)], values[len(op.inputs):]
    if op.type == "MaxPool":
        return _window_maximum_moved(op, before[0], after[0])
    if op.type in KINK_AT_ZERO:
        kink = 6.0 if op.type == "Relu6" else 0.0
        a, b = before[0] - kink, after[0] - kink
    elif len(before) >= 2 and before[0].dtype != bool:
        a, b = before[0] - before[1], after[0] - after[1]
    else:
        return False
    return np.shape(a) == np.shape(b) and bool(np.any(np.sign(a) != np.sign(b)))


def _window_maximum_moved(op: Any, before: np.ndarray, after: np.ndarray) -> bool:
    tf = tensorflow()
    try:
        if op.get_attr("data_format") != b"NHWC":
            return False
        window = {"ksize": op.get_attr("ksize"), "strides": op.get_attr("strides"),
                  "padding": op.get_attr("padding").decode()}
        winners = [tf.nn.max_pool_with_argmax(tf.constant(v), **window)[1].numpy()
                   for v in (before, after)]
    except Exception:  # noqa: BLE001 - a pooling this probe cannot replay names no site
        return False
    return bool(np.any(winners[0] != winners[1]))
