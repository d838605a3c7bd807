"""f's gradient in its own low precision (float16, bfloat16) and the same computation in
float32: Keras layers among its arguments switched to the float32 policy, low-precision
arguments cast to float32, the same weights."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.engine.arrays import as_array
from gradcheck.engine.program import Program, flatten_outputs
from gradcheck.engine.runtime import tensorflow
from gradcheck.targets.keras import compute_dtype, program_layers

LOW_PRECISION = ("float16", "bfloat16")


@dataclass(frozen=True)
class PrecisionGradients:
    """Per source (program.sources order): its gradient in f's precision and in float32, both
    of the (scaled) uᵀy of f's differentiable outputs; `dtype` is f's low precision."""

    dtype: str
    names: tuple[str, ...]
    low: tuple[np.ndarray | None, ...]
    reference: tuple[np.ndarray | None, ...]
    loss_scale: float
    values: tuple[float, float] = (0.0, 0.0)  # f's (summed) value in each precision


def low_precision(program: Program, outputs: Sequence[Any]) -> str | None:
    """The low precision f computes in: its arguments', its outputs', or its Keras layers'."""
    dtypes = [slot.dtype for slot in program.slots if slot.differentiable]
    dtypes += [str(getattr(getattr(o, "dtype", None), "name", "")) for o in outputs]
    dtypes += [d for d in map(compute_dtype, program_layers(program)) if d]
    return next((d for d in LOW_PRECISION if d in dtypes), None)


@contextlib.contextmanager
def _float32_layers(layers: Sequence[Any]) -> Iterator[None]:
    saved = [(layer, layer.dtype_policy) for layer in layers if hasattr(layer, "dtype_policy")
             and compute_dtype(layer) in LOW_PRECISION]
    try:
        for layer, _ in saved:
            layer.dtype_policy = "float32"
        yield
    finally:
        for layer, policy in saved:
            layer.dtype_policy = policy


def _gradients(program: Program, diff_outputs: Sequence[int], upstreams: Sequence[Any],
               scale: float, replacements: dict[int, Any]
               ) -> tuple[list[np.ndarray | None], list[str], float]:
    tf = tensorflow()
    sources = [i for i, s in enumerate(program.slots) if s.differentiable]
    watched = {i: replacements.get(i, program.slots[i].value) for i in sources}
    with tf.GradientTape() as tape:
        for value in watched.values():
            tape.watch(value)
        leaves = flatten_outputs(program.call({i: v for i, v in watched.items()
                                               if program.slots[i].argument}))
        chosen = [leaves[k].tensor for k in diff_outputs]
        # uᵀJ with the other checks' upstreams: 1ᵀJ is zero by construction for some f (the
        # probabilities of a softmax sum to 1).
        total = tf.add_n([tf.reduce_sum(tf.cast(t, tf.float32) * tf.constant(u, tf.float32))
                          for t, u in zip(chosen, upstreams)])
        scaled = total * scale if scale != 1.0 else total
    gradients = tape.gradient(scaled, list(watched.values()))
    arrays = [None if g is None else np.asarray(as_array(tf.convert_to_tensor(g)), np.float64)
              / scale for g in gradients]
    return arrays, [str(t.dtype.name) for t in chosen], float(as_array(total))


def precision_gradients(program: Program, diff_outputs: Sequence[int],
                        upstreams: Sequence[Any], dtype: str, loss_scale: float = 1.0
                        ) -> PrecisionGradients | None:
    """Both gradients, or None when f still computes in low precision with its layers in
    float32 and its arguments cast (it casts to float16 itself: no float32 copy to compare)."""
    tf = tensorflow()
    low, _, value = _gradients(program, diff_outputs, upstreams, loss_scale, {})
    casts = {i: tf.cast(s.value, tf.float32) for i, s in enumerate(program.slots)
             if s.differentiable and s.argument and s.dtype in LOW_PRECISION}
    try:
        with _float32_layers(program_layers(program)):
            reference, dtypes, reference_value = _gradients(program, diff_outputs, upstreams,
                                                            1.0, casts)
    except Exception:  # f fixes low-precision constants of its own: float32 arguments clash
        return None
    if any(d in LOW_PRECISION for d in dtypes):
        return None
    names = tuple(s.name for s in program.slots if s.differentiable)
    return PrecisionGradients(dtype, names, tuple(low), tuple(reference), loss_scale,
                              (value, reference_value))


@dataclass(frozen=True)
class HeadRun:
    """f again with only its model's output layer `layer` (a `kind`, in model `model`, under
    dtype policy `policy`) in float32: its gradients and value, as precision_gradients'."""

    layer: str
    kind: str
    model: str
    policy: str
    gradients: tuple[np.ndarray | None, ...]
    value: float


def output_layers(program: Program) -> list[tuple[Any, Any]]:
    """(model, its last layer) for each Keras model f is or is given whose last layer
    computes in low precision: the head the Keras mixed-precision guide keeps in float32."""
    candidates = [getattr(program.function, "layer", program.function)]
    candidates += [slot.value for slot in program.slots if not slot.differentiable]
    found: list[tuple[Any, Any]] = []
    for model in candidates:
        layers = getattr(model, "layers", None)
        if not isinstance(layers, list) or not layers:
            continue
        head = layers[-1]
        while isinstance(getattr(head, "layers", None), list) and head.layers:
            head = head.layers[-1]  # a nested model's own head
        if compute_dtype(head) in LOW_PRECISION and all(head is not h for _, h in found):
            found.append((model, head))
    return found


def head_in_float32(program: Program, diff_outputs: Sequence[int], upstreams: Sequence[Any],
                    scale: float) -> list[HeadRun]:
    """f's gradients with each low-precision output layer alone switched to float32."""
    runs = []
    for model, head in output_layers(program):
        policy = getattr(head, "dtype_policy", None)
        try:
            with _float32_layers([head]):
                gradients, _, value = _gradients(program, diff_outputs, upstreams, scale, {})
        except Exception:  # noqa: BLE001 - the head's float32 output clashes downstream
            continue
        runs.append(HeadRun(str(head.name), type(head).__name__, str(getattr(model, "name", "")),
                            str(getattr(policy, "name", compute_dtype(head))),
                            tuple(gradients), value))
    return runs


def optimizer_loss_scale(program: Program) -> float | None:
    """The dynamic loss scale of a LossScaleOptimizer held by a Keras model among f's
    arguments (--loss-scale auto)."""
    for slot in program.slots:
        optimizer = getattr(slot.value, "optimizer", None)
        scale = getattr(optimizer, "dynamic_scale", None)
        if scale is None:
            scale = getattr(optimizer, "loss_scale", None)
        if scale is not None and not callable(scale):
            return float(as_array(scale))
    return None
