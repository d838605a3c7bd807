"""A function's values and VJP (a seeded random upstream) at given arguments, for the arguments
and the trainable variables it reads: what the `against` check compares between two TARGETs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.engine.arrays import as_array, dense_values
from gradcheck.engine.runtime import tensorflow
from gradcheck.engine.variables import weight_path


@dataclass(frozen=True)
class VjpAt:
    """f's output leaves, and uᵀJ per source (the floating arguments, then the trainable
    variables in the order f reads them), named; `missing_op`: the op whose gradient
    TensorFlow could not find (then no gradients)."""

    values: tuple[np.ndarray, ...]
    names: tuple[str, ...] = ()
    gradients: tuple[np.ndarray | None, ...] = ()
    missing_op: str | None = None
    dtype: str = "float32"


def _floating(value: Any) -> bool:
    return np.asarray(value).dtype.kind in "fc" if not callable(value) else False


def vjp_at(function: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any],
           names: Sequence[str], seed: int) -> VjpAt:
    tf = tensorflow()
    sources = [tf.constant(a) if _floating(a) else a for a in args]
    watched = [(name, s) for name, s, a in zip(names, sources, args) if _floating(a)]
    with tf.GradientTape() as tape:
        tape.watch([s for _, s in watched])
        try:
            result = function(*sources, **kwargs)
            leaves = [tf.convert_to_tensor(y) for y in tf.nest.flatten(result)]
        except LookupError as exc:  # a restored function builds its gradient when taped
            return VjpAt((), missing_op=str(exc).rpartition("op type: ")[2].split(")")[0])
        rng = np.random.default_rng(seed)
        floating = [y for y in leaves if y.dtype.is_floating]
        total = tf.add_n([tf.reduce_sum(y * tf.constant(rng.standard_normal(y.shape), y.dtype))
                          for y in floating]) if floating else None
    variables = [v for v in tape.watched_variables() if v.trainable]
    gradients = [None] * (len(watched) + len(variables)) if total is None else tape.gradient(
        total, [s for _, s in watched] + variables)
    return VjpAt(tuple(np.asarray(as_array(y), np.float64) for y in leaves),
                 tuple([name for name, _ in watched] + [weight_path(v) for v in variables]),
                 tuple(None if g is None else np.asarray(as_array(dense_values(g)), np.float64)
                       for g in gradients), dtype=floating[0].dtype.name if floating else "float32")
