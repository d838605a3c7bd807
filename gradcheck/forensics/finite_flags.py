"""One finiteness flag per tensor of a graph being traced, added in one GraphDef import: a large
model has thousands of tensors, and TensorFlow's Python makes ops one by one (seconds)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gradcheck.engine.runtime import tensorflow


def finite_flags(tensors: Sequence[Any]) -> Any:
    """A bool vector, in the default graph: whether every element of each tensor is finite."""
    tf = tensorflow()
    if not tensors:
        return tf.zeros([0], tf.bool)
    from tensorflow.python.framework import importer

    graph_def = tf.compat.v1.GraphDef()
    mapped: dict[str, Any] = {}

    def node(name: str, op: str, inputs: Sequence[str], **types: Any) -> str:
        made = graph_def.node.add(name=name, op=op, input=list(inputs))
        for attr, dtype in types.items():
            made.attr[attr].type = dtype.as_datatype_enum
        return name

    def given(name: str, tensor: Any) -> str:
        mapped[name] = tensor
        return node(name, "Placeholder", [], dtype=tensor.dtype)

    def finite(k: int, tensor: Any) -> str:
        name = given(f"t{k}", tensor)
        if not tensor.dtype.is_complex:
            return node(f"finite{k}", "IsFinite", [name], T=tensor.dtype)
        real = tensor.dtype.real_dtype
        parts = [node(f"{part}{k}", part, [name], T=tensor.dtype, Tout=real)
                 for part in ("Real", "Imag")]
        return node(f"finite{k}", "LogicalAnd", [
            node(f"{part}_finite{k}", "IsFinite", [p], T=real) for part, p in zip(
                ("Real", "Imag"), parts)])

    def axes(rank: int | None) -> str:
        name = f"axes{rank}"
        if name not in mapped:
            given(name, tf.constant([-1] if rank is None else list(range(rank)), tf.int32))
        return name

    flags = []
    for k, tensor in enumerate(tensors):
        rank = tensor.shape.rank
        each = finite(k, tensor)
        if rank is None:  # flattened, then reduced over its one axis
            each = node(f"flat{k}", "Reshape", [each, axes(None)], T=tf.bool, Tshape=tf.int32)
        flags.append(node(f"all{k}", "All", [each, axes(1 if rank is None else rank)],
                          Tidx=tf.int32))
    packed = graph_def.node.add(name="flags", op="Pack", input=flags)
    packed.attr["T"].type = tf.bool.as_datatype_enum
    packed.attr["N"].i = len(flags)
    found = importer.import_graph_def(graph_def, input_map=mapped, return_elements=["flags:0"],
                                      name="gradcheck_finite")
    return found[0]
