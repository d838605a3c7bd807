"""The same VJP computed inside tf.function, with or without XLA (jit_compile=True)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.tf.program import Program, flatten_outputs
from gradcheck.tf.runtime import silenced_stderr_fd, tensorflow


@dataclass(frozen=True)
class CompiledVJP:
    """The gradients for each source (None where there is none) and f's outputs."""

    gradients: list[np.ndarray | None]
    outputs: list[np.ndarray]


def _argument_dtype(program: Program, index: int, own_dtype: bool) -> str:
    slot = program.slots[index]
    return (slot.own_dtype if own_dtype else None) or slot.dtype


def eager_vjp(program: Program, output_indices: Sequence[int],
              upstreams: Sequence[np.ndarray]) -> CompiledVJP:
    """The eager VJP with the arguments in the user's own dtype (not gradcheck's float64)."""
    return _vjp(program, output_indices, upstreams, None, True)


def compiled_vjp(program: Program, output_indices: Sequence[int],
                 upstreams: Sequence[np.ndarray], jit: bool,
                 own_dtype: bool = False) -> CompiledVJP:
    """tape.gradient(ys, sources, output_gradients=us) inside one tf.function (arguments in
    the user's own dtype if asked); raises what tracing or compiling raises."""
    return _vjp(program, output_indices, upstreams, jit, own_dtype)


def _vjp(program: Program, output_indices: Sequence[int], upstreams: Sequence[np.ndarray],
         jit: bool | None, own_dtype: bool) -> CompiledVJP:
    """The VJP eagerly (jit None) or inside a tf.function."""
    tf = tensorflow()
    sources = [i for i, slot in enumerate(program.slots) if slot.differentiable]
    arguments = [i for i in sources if program.slots[i].argument
                 and not program.slots[i].is_variable]

    def vjp(*values: Any) -> list[Any]:
        replacements = dict(zip(arguments, values))
        with tf.GradientTape() as tape:
            for value in values:
                tape.watch(value)
            call = program.call if jit is None else program.call_converted
            leaves = flatten_outputs(call(replacements))
        targets = [leaves[k].tensor for k in output_indices]
        watched = [replacements.get(i, program.slots[i].value) for i in sources]
        grads = tape.gradient(targets, watched, output_gradients=[
            tf.constant(u, dtype=t.dtype) for u, t in zip(upstreams, targets)])
        return [tf.zeros(0, tf.float64) if g is None else tf.cast(
            tf.convert_to_tensor(g), tf.float64) for g in grads] + [
            tf.cast(t, tf.float64) for t in targets]

    compiled = vjp if jit is None else tf.function(vjp, jit_compile=jit, autograph=False)
    values = [tf.constant(program.value_of(i), dtype=_argument_dtype(program, i, own_dtype))
              for i in arguments]
    if jit is not None:
        program.announce(f"the VJP under tf.function{' with XLA' if jit else ''}")
    with silenced_stderr_fd():
        grads = compiled(*values)
    shapes = [program.slots[i].shape for i in sources]
    return CompiledVJP(
        [None if g.shape == (0,) and shape != (0,) else np.asarray(g).reshape(shape)
         for g, shape in zip(grads, shapes)],
        [np.asarray(t) for t in grads[len(sources):]])
