"""The same VJP computed inside tf.function, with or without XLA (jit_compile=True)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gradcheck.engine.arrays import as_array
from gradcheck.engine.program import Program, flatten_outputs
from gradcheck.engine.runtime import functions_eager, silenced_stderr_fd, tensorflow
from gradcheck.engine.traces import first_traced
from gradcheck.evidence.causes.checks import GraphGradientRaised
from gradcheck.evidence.location import Location
from gradcheck.load.locations import innermost_user_frame
from gradcheck.user_code import is_user_file

# The attribute of an exception raised by TensorFlow's own gradient of an op while the VJP is
# traced: a GraphGradientRaised.
RAISING_GRADIENT = "gradcheck_raising_gradient"


@dataclass(frozen=True)
class CompiledVJP:
    """The gradients for each source (None where there is none), f's outputs and their
    dtypes."""

    gradients: list[np.ndarray | None]
    outputs: list[np.ndarray]
    dtypes: list[str]


def _argument_dtype(program: Program, index: int, own_dtype: bool) -> str:
    slot = program.slots[index]
    return (slot.own_dtype if own_dtype else None) or slot.dtype


def eager_vjp(program: Program, output_indices: Sequence[int],
              upstreams: Sequence[np.ndarray]) -> CompiledVJP:
    """The eager VJP with the arguments in the user's own dtype (not gradcheck's float64)."""
    return _vjp(program, output_indices, upstreams, None, True, None)


def compiled_vjp(program: Program, output_indices: Sequence[int],
                 upstreams: Sequence[np.ndarray], jit: bool,
                 own_dtype: bool = False, output_dtypes: Sequence[str] | None = None
                 ) -> CompiledVJP:
    """tape.gradient(ys, sources, output_gradients=us) inside one tf.function (arguments in
    the user's own dtype if asked), traced and compiled once for every call with the same f,
    variables, shapes and dtypes (the point and the upstreams are its arguments); the
    upstreams are given in `output_dtypes` (the outputs' dtypes: cast inside otherwise).

    f is traced as it is first: only Python control flow on tensors needs AutoGraph, and
    there tracing raises; then converted as tf.function converts it (a Python `if` on a
    tensor becomes tf.cond). Raises what the converted trace (or compiling) raises."""
    return _vjp(program, output_indices, upstreams, jit, own_dtype, output_dtypes)


def _vjp_body(output_indices: tuple[int, ...], count: int, converted: bool
              ) -> Callable[..., list[Any]]:
    """The VJP of a program at `count` argument values, the upstreams following them; f
    converted by AutoGraph if asked (inside tf.function)."""
    tf = tensorflow()

    def vjp(program: Program, *tensors: Any) -> list[Any]:
        sources, arguments = _sources(program)
        replacements = dict(zip(arguments, tensors[:count]))
        with tf.GradientTape() as tape:
            for value in tensors[:count]:
                tape.watch(value)
            call = program.call_converted if converted else program.call
            leaves = flatten_outputs(call(replacements))
        targets = [leaves[k].tensor for k in output_indices]
        watched = [replacements.get(i, program.slots[i].value) for i in sources]
        try:
            grads = tape.gradient(targets, watched, output_gradients=[
                u if u.dtype == t.dtype else tf.cast(u, t.dtype)
                for u, t in zip(tensors[count:], targets)])
        except Exception as exc:  # tf.function's handler will drop TensorFlow's own frames
            setattr(exc, RAISING_GRADIENT, _raising_gradient(exc))
            raise
        return [tf.zeros(0, tf.float64) if g is None else tf.cast(
            tf.convert_to_tensor(g), tf.float64) for g in grads] + [
            tf.cast(t, tf.float64) for t in targets] + [
            tf.zeros(0, t.dtype) for t in targets]

    return vjp


def _traced_line(outputs: Any) -> Location | None:
    """The line of f that made the traced op whose `outputs` these are (its graph traceback)."""
    try:
        return innermost_user_frame(outputs[0].op.traceback)
    except (AttributeError, IndexError, TypeError):  # an op without a graph traceback
        return None


def _raising_gradient(exc: BaseException) -> GraphGradientRaised | None:
    """The op whose TensorFlow gradient function raised `exc` while tf.function traced f's
    gradient, when no frame of the user's runs after it (a grad_fn of theirs that raised has
    its own line)."""
    found: GraphGradientRaised | None = None
    tb, op, line = exc.__traceback__, None, None
    while tb is not None:
        code = tb.tb_frame.f_code
        if op is not None and found is None:
            found = GraphGradientRaised(str(op), Path(code.co_filename).stem, code.co_name,
                                        line)
        if code.co_name == "_gradient_function" and code.co_filename.endswith("backprop.py"):
            op, found = tb.tb_frame.f_locals.get("op_name"), None
            line = _traced_line(tb.tb_frame.f_locals.get("outputs"))
        elif found is not None and is_user_file(code.co_filename):
            return None
        tb = tb.tb_next
    return found


def _sources(program: Program) -> tuple[list[int], list[int]]:
    """The differentiable slots, and those of them that are tensor arguments."""
    sources = [i for i, slot in enumerate(program.slots) if slot.differentiable]
    return sources, [i for i in sources if program.slots[i].argument
                     and not program.slots[i].is_variable]


def _vjp(program: Program, output_indices: Sequence[int], upstreams: Sequence[np.ndarray],
         jit: bool | None, own_dtype: bool, output_dtypes: Sequence[str] | None
         ) -> CompiledVJP:
    """The VJP eagerly (jit None) or inside a tf.function."""
    tf = tensorflow()
    sources, arguments = _sources(program)
    dtypes = [_argument_dtype(program, i, own_dtype) for i in arguments]
    values = [tf.constant(program.value_of(i), dtype=dtype) for i, dtype in zip(arguments, dtypes)]
    us = [tf.constant(u, dtype=dtype) for u, dtype in zip(
        upstreams, output_dtypes or ["float64"] * len(upstreams))]
    if jit is None:
        with silenced_stderr_fd():
            grads = _vjp_body(tuple(output_indices), len(values), False)(program, *values, *us)
    else:
        program.announce(f"the VJP under tf.function{' with XLA' if jit else ''}")
        attempts = [(("vjp", tuple(output_indices), jit, tuple(dtypes), converted),
                     _vjp_body(tuple(output_indices), len(values), converted))
                    for converted in (False, True)]
        with silenced_stderr_fd(), functions_eager(False):
            grads = first_traced(program, attempts, values + us, jit_compile=jit,
                                 autograph=False)
    shapes = [program.slots[i].shape for i in sources]
    count = len(output_indices)
    return CompiledVJP(
        [None if g.shape == (0,) and shape != (0,) else as_array(g).reshape(shape)
         for g, shape in zip(grads, shapes)],
        [as_array(t) for t in grads[len(sources):len(sources) + count]],
        [t.dtype.name for t in grads[len(sources) + count:]])
