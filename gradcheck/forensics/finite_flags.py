"""Reductions of many tensors of a traced graph to a few small ones, added in one GraphDef
import each: one finiteness flag per tensor, what a few tensors' non-finite elements are
(non_finite_summary.py), whether a fix made every output and gradient finite. A large model has
thousands of tensors, and TensorFlow's Python makes ops one by one (seconds): the import is
done in its C API alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gradcheck.engine.runtime import tensorflow


class _Nodes:
    """A GraphDef of reductions whose inputs are tensors of the default graph."""

    def __init__(self) -> None:
        self.tf = tensorflow()
        self.graph_def = self.tf.compat.v1.GraphDef()
        self.mapped: dict[str, Any] = {}

    def node(self, name: str, op: str, inputs: Sequence[str], **types: Any) -> str:
        made = self.graph_def.node.add(name=name, op=op, input=list(inputs))
        for attr, dtype in types.items():
            made.attr[attr].type = dtype.as_datatype_enum
        return name

    def given(self, name: str, tensor: Any) -> str:
        self.mapped[name] = tensor
        return self.node(name, "Placeholder", [], dtype=tensor.dtype)

    def constant(self, name: str, value: Any, dtype: Any) -> str:
        return name if name in self.mapped else self.given(name, self.tf.constant(value, dtype))

    def axes(self, rank: int | None) -> str:
        """All axes of a tensor of that rank ([-1] for a reshape to one axis when None)."""
        return self.constant(f"axes{rank}", [-1] if rank is None else list(range(rank)),
                             self.tf.int32)

    def finite(self, name: str, tensor: Any) -> str:
        """Elementwise: whether the tensor (given as `name`) is finite."""
        if not tensor.dtype.is_complex:
            return self.node(f"{name}_finite", "IsFinite", [name], T=tensor.dtype)
        real = tensor.dtype.real_dtype
        parts = [self.node(f"{name}_{part}", part, [name], T=tensor.dtype, Tout=real)
                 for part in ("Real", "Imag")]
        return self.node(f"{name}_finite", "LogicalAnd", [
            self.node(f"{p}_finite", "IsFinite", [p], T=real) for p in parts])

    def all_finite(self, name: str, tensor: Any) -> str:
        """Whether every element of the tensor (given as `name`) is finite: a bool scalar."""
        rank = tensor.shape.rank
        each = self.finite(name, tensor)
        if rank is None:  # flattened, then reduced over its one axis
            each = self.node(f"{name}_flat", "Reshape", [each, self.axes(None)], T=self.tf.bool,
                             Tshape=self.tf.int32)
        return self.node(f"{name}_all", "All", [each, self.axes(1 if rank is None else rank)],
                         Tidx=self.tf.int32)

    def health(self, name: str, tensor: Any) -> str:
        """One op, [-1, 1.0 if any element of the tensor (given as `name`) is NaN or infinite
        else 0.0] (float32): tfdbg's CURT_HEALTH summary, which reads the tensor in place;
        IsFinite and All would make a bool copy of it and double the flags' ops to make."""
        if tensor.dtype.is_complex:
            bad = self.node(f"{name}_bad", "Cast", [
                self.node(f"{name}_some", "LogicalNot", [self.all_finite(name, tensor)])],
                SrcT=self.tf.bool, DstT=self.tf.float32)
            return self.packed(f"{name}_health", [
                self.constant("minus_one", -1.0, self.tf.float32), bad], self.tf.float32)
        from tensorflow.core.protobuf import debug_event_pb2

        made = self.graph_def.node.add(name=f"{name}_health", op="DebugNumericSummaryV2",
                                       input=[name])
        made.attr["T"].type = tensor.dtype.as_datatype_enum
        made.attr["output_dtype"].type = self.tf.float32.as_datatype_enum
        made.attr["tensor_debug_mode"].i = debug_event_pb2.TensorDebugMode.CURT_HEALTH
        made.attr["tensor_id"].i = -1
        return made.name

    def packed(self, name: str, inputs: Sequence[str], dtype: Any) -> str:
        made = self.graph_def.node.add(name=name, op="Pack", input=list(inputs))
        made.attr["T"].type = dtype.as_datatype_enum
        made.attr["N"].i = len(inputs)
        return name

    def imported(self, outputs: Sequence[str]) -> list[Any]:
        """The outputs, once the GraphDef is imported into the default graph in TensorFlow's C
        API alone: its Python would wrap each imported op in an Operation and sort out its
        device and colocation (most of the import's time on a large model). They are outputs
        subgraphs.py runs, not tf.Tensors, and TensorFlow's Python never sees their ops."""
        from tensorflow.python.client import pywrap_tf_session as c_api
        from tensorflow.python.framework import c_api_util

        graph = self.tf.compat.v1.get_default_graph()
        prefix = graph.unique_name("gradcheck_finite")  # taken: no op of Python's gets it
        scoped = c_api_util.ScopedTFImportGraphDefOptions()
        options = scoped.options
        c_api.TF_ImportGraphDefOptionsSetPrefix(options, prefix)
        for name, tensor in self.mapped.items():
            c_api.TF_ImportGraphDefOptionsAddInputMapping(
                options, name, 0, tensor._as_tf_output())  # noqa: SLF001
        for name in outputs:
            c_api.TF_ImportGraphDefOptionsAddReturnOutput(options, name, 0)
        for node in self.graph_def.node:
            if node.name not in self.mapped:  # a given one stands for a tensor of the graph
                c_api.TF_ImportGraphDefOptionsAddReturnOperation(options, node.name)
        serialized = c_api.TF_NewBufferFromString(self.graph_def.SerializeToString())
        try:
            with graph._c_graph.get() as c_graph:  # noqa: SLF001 - no public way in
                results = c_api_util.ScopedTFImportGraphDefResults(
                    c_api.TF_GraphImportGraphDefWithResults(c_graph, serialized, options))
        finally:
            c_api.TF_DeleteBuffer(serialized)
        made = tuple(c_api.TF_ImportGraphDefResultsReturnOperations(results.results))
        reads = tuple(self.mapped.values())
        return [ImportedOutput(graph, output, made, reads, results)
                for output in c_api.TF_ImportGraphDefResultsReturnOutputs(results.results)]


class ImportedOutput:
    """An output of ops imported in TensorFlow's C API alone: what subgraphs.Subgraph needs to
    fetch it (the ops the import made, `c_ops`; the graph's tensors they read, `reads`)."""

    def __init__(self, graph: Any, output: Any, made: tuple[Any, ...], reads: tuple[Any, ...],
                 keep: Any) -> None:
        self.graph, self.c_ops, self.reads = graph, made, reads
        self._output, self._keep = output, keep  # the import's results own the outputs

    def _as_tf_output(self) -> Any:
        return self._output


def finite_flags(tensors: Sequence[Any], described: Sequence[Any] = ()) -> tuple[Any, Any]:
    """In the default graph (ImportedOutputs; a tf.Tensor where empty): a bool vector, whether
    every element of each tensor is finite; and an int64 [len(described), 4] matrix: per real
    float tensor of `described`, its count of non-finite elements, the flat position of the
    first, whether any is NaN, whether its largest element is +inf (for a tensor without NaN:
    whether it holds +inf)."""
    tf = tensorflow()
    nodes = _Nodes()

    def summary(k: int, tensor: Any) -> str:
        dtype, flat = tensor.dtype, f"s{k}_flat"
        nodes.node(flat, "Reshape", [nodes.given(f"s{k}", tensor), nodes.axes(None)], T=dtype,
                   Tshape=tf.int32)
        bad = nodes.node(f"s{k}_bad", "LogicalNot", [nodes.finite(flat, tensor)])
        counted = nodes.node(f"s{k}_int", "Cast", [bad], SrcT=tf.bool, DstT=tf.int32)
        first = nodes.node(f"s{k}_first", "ArgMax", [bad, nodes.constant("zero", 0, tf.int32)],
                           T=tf.bool, Tidx=tf.int32, output_type=tf.int64)
        nan = nodes.node(f"s{k}_nan", "Any", [
            nodes.node(f"s{k}_isnan", "IsNan", [flat], T=dtype), nodes.axes(1)], Tidx=tf.int32)
        largest = nodes.node(f"s{k}_max", "Max", [flat, nodes.axes(1)], T=dtype, Tidx=tf.int32)
        positive = nodes.node(f"s{k}_inf", "Equal", [
            largest, nodes.constant(f"inf_{dtype.name}", float("inf"), dtype)], T=dtype)
        count = nodes.node(f"s{k}_count", "Sum", [counted, nodes.axes(1)], T=tf.int32,
                           Tidx=tf.int32)
        wide = [nodes.node(f"{name}_int64", "Cast", [name], SrcT=source, DstT=tf.int64)
                for name, source in ((count, tf.int32), (nan, tf.bool), (positive, tf.bool))]
        return nodes.packed(f"s{k}_row", [wide[0], first, *wide[1:]], tf.int64)

    flags = _flags(nodes, [nodes.health(nodes.given(f"t{k}", t), t)
                           for k, t in enumerate(tensors)]) if tensors else ""
    rows = [summary(k, tensor) for k, tensor in enumerate(described)]
    found = iter(nodes.imported([name for name in (
        flags, nodes.packed("summaries", rows, tf.int64) if rows else "") if name]))
    return (next(found) if flags else tf.zeros([0], tf.bool),
            next(found) if rows else tf.zeros([0, 4], tf.int64))


def _flags(nodes: _Nodes, health: Sequence[str]) -> str:
    """Whether each tensor is finite (a bool vector): its health row's second element is 0."""
    tf, one = nodes.tf, nodes.constant("one", 1, nodes.tf.int32)
    bad = nodes.node("bad", "GatherV2", [nodes.packed("health", health, tf.float32), one, one],
                     Tparams=tf.float32, Tindices=tf.int32, Taxis=tf.int32)
    return nodes.node("flags", "Equal", [bad, nodes.constant("zero_float32", 0.0, tf.float32)],
                      T=tf.float32)


def finite_and_largest(tensors: Sequence[Any], gradients: Sequence[Any]) -> tuple[Any, Any]:
    """In the default graph (ImportedOutputs; tf.Tensors where empty): whether every element
    of `tensors` and `gradients` is finite (a bool scalar), and the largest |element| of a
    non-empty gradient (float64, -inf without one; meaningful when all are finite)."""
    tf = tensorflow()
    nodes = _Nodes()
    flags = [nodes.all_finite(nodes.given(f"t{k}", t), t) for k, t in enumerate(tensors)]
    largest = []
    for k, gradient in enumerate(gradients):
        name, dtype, size = nodes.given(f"g{k}", gradient), gradient.dtype, \
            gradient.shape.num_elements()
        flags.append(nodes.all_finite(name, gradient))
        if size == 0:
            continue
        rank = gradient.shape.rank
        if rank is None:
            name, rank = nodes.node(f"g{k}_values", "Reshape", [name, nodes.axes(None)], T=dtype,
                                    Tshape=tf.int32), 1
        if dtype.is_complex:
            name = nodes.node(f"g{k}_abs", "ComplexAbs", [name], T=dtype, Tout=dtype.real_dtype)
            dtype = dtype.real_dtype
            ends = [nodes.node(f"g{k}_max", "Max", [name, nodes.axes(rank)], T=dtype,
                               Tidx=tf.int32)]
        else:  # the largest |g| without making |g|: max(max g, -min g)
            ends = [nodes.node(f"g{k}_max", "Max", [name, nodes.axes(rank)], T=dtype,
                               Tidx=tf.int32),
                    nodes.node(f"g{k}_neg", "Neg", [nodes.node(f"g{k}_min", "Min", [
                        name, nodes.axes(rank)], T=dtype, Tidx=tf.int32)], T=dtype)]
        ends = [nodes.node(f"{end}_wide", "Cast", [end], SrcT=dtype, DstT=tf.float64)
                for end in ends]
        if size is None:  # empty only when run: then its ends stand for no element
            empty = nodes.node(f"g{k}_empty", "Equal", [
                nodes.node(f"g{k}_size", "Size", [name], T=dtype, out_type=tf.int32),
                nodes.constant("zero", 0, tf.int32)], T=tf.int32)
            ends = [nodes.node(f"{end}_or_none", "SelectV2", [
                empty, nodes.constant("minus_infinity", float("-inf"), tf.float64), end],
                T=tf.float64) for end in ends]
        largest += ends
    outputs = []
    if flags:
        outputs.append(nodes.node("finite", "All", [nodes.packed("flags", flags, tf.bool),
                                                    nodes.axes(1)], Tidx=tf.int32))
    if largest:
        outputs.append(nodes.node("largest", "Max", [nodes.packed(
            "largest_each", largest, tf.float64), nodes.axes(1)], T=tf.float64, Tidx=tf.int32))
    found = iter(nodes.imported(outputs))
    return (next(found) if flags else tf.constant(True),
            next(found) if largest else tf.constant(float("-inf"), tf.float64))
