"""The gradient as a function of its own: g(x) = (Σₖ uₖᵀ ∂yₖ/∂xᵢ)ᵢ computed under an inner
GradientTape, so that every first-order check (Jacobian, fast mode) applied to g checks the
second derivative of f (the Hessian, for a scalar y and u = 1) by nested tapes."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from gradcheck.engine.program import Program, flatten_outputs, function_name
from gradcheck.engine.recording import Recording, record
from gradcheck.engine.runtime import tensorflow
from gradcheck.targets.named import OutputPath


def _argument_values(program: Program, args: Sequence[Any], kwargs: dict[str, Any]
                     ) -> dict[int, Any]:
    """Slot index -> the value Program.call passed for it (the inverse of its argument order)."""
    values: dict[int, Any] = {}
    positional = iter(args)
    for index, slot in enumerate(program.slots):
        if slot.argument:
            values[index] = kwargs[slot.keyword] if slot.keyword is not None else next(positional)
    return values


def gradient_program(program: Program, rows: Sequence[int], outputs: Sequence[int],
                     upstreams: Sequence[np.ndarray]) -> Program:
    """g(*args) = the VJP of the selected outputs with these upstreams, for each row argument
    (zeros where f does not depend on it), differentiable with respect to the row arguments."""
    tf = tensorflow()

    def gradient(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
        values = _argument_values(program, args, kwargs)
        watched = [values[i] for i in rows]
        with tf.GradientTape() as tape:
            for tensor in watched:
                tape.watch(tensor)
            leaves = flatten_outputs(program.function(*args, **kwargs))
        targets = [leaves[k].tensor for k in outputs]
        grads = tape.gradient(targets, watched, output_gradients=[
            tf.constant(u, dtype=t.dtype) for u, t in zip(upstreams, targets)])
        return tuple(tf.zeros_like(w) if g is None else tf.convert_to_tensor(g)
                     for g, w in zip(grads, watched))

    gradient.__name__ = gradient.__qualname__ = f"the gradient of {function_name(program.function)}"
    slots = tuple(dataclasses.replace(slot, differentiable=index in rows)
                  for index, slot in enumerate(program.slots))
    return Program(gradient, slots, dataclasses.replace(program.evaluation, wrt="inputs"))


def record_gradient(program: Program, rows: Sequence[int], outputs: Sequence[int],
                    upstreams: Sequence[np.ndarray], names: Sequence[str]) -> Recording:
    """g recorded under a persistent tape (its outputs named `names`): its tape.gradient and
    tape.jacobian are reverse over reverse. Raises FunctionError when computing g raises."""
    program.announce("the gradient under a second GradientTape (nested tapes)")
    recording = record(gradient_program(program, rows, outputs, upstreams))
    return dataclasses.replace(recording, outputs=[
        dataclasses.replace(leaf, path=OutputPath(name))
        for leaf, name in zip(recording.outputs, names, strict=True)])
