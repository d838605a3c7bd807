"""A training process's state kept across a live diagnosis: the model's variables (weights,
batch statistics, seed-generator states), its metrics' variables, and the random number
generators (TensorFlow's global generator and op seeds, Python's, NumPy's), put back bitwise."""

from __future__ import annotations

import contextlib
import random
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from gradcheck.engine.runtime import tensorflow


def model_variables(model: Any, metrics: bool = True) -> list[Any]:
    """Every variable of a Keras model (Keras 3, tf-keras) or a tf.Module, once, its metrics'
    included (unless `metrics` is False); the trainable ones first, in the model's order."""
    found: list[Any] = []
    seen: set[int] = set()

    def add(variables: Any) -> None:
        for variable in variables or ():
            if id(variable) not in seen:
                seen.add(id(variable))
                found.append(variable)

    for attribute in ("trainable_variables", "variables", "non_trainable_variables",
                      "metrics_variables")[:None if metrics else 3]:
        with contextlib.suppress(Exception):  # an unbuilt tf-keras model refuses to list
            add(getattr(model, attribute, None))
    if not metrics:
        return found
    with contextlib.suppress(Exception):
        for metric in getattr(model, "metrics", None) or ():
            add(getattr(metric, "variables", None))
    return found


def _random_states() -> list[tuple[Any, Any]]:
    """(restore, state) of every random number generator a call of the model may draw from."""
    from tensorflow.python.eager import context
    from tensorflow.python.ops import stateful_random_ops

    states: list[tuple[Any, Any]] = [(random.setstate, random.getstate()),
                                     (np.random.set_state, np.random.get_state())]
    rng = getattr(context.context(), "_rng", None)
    if rng is not None:  # op seeds drawn under tf.random.set_seed
        states.append((rng.setstate, rng.getstate()))
    generator = getattr(stateful_random_ops, "global_generator", None)
    if generator is not None and getattr(stateful_random_ops, "_global_generator", None):
        state = stateful_random_ops._global_generator.state
        states.append((state.assign, state.numpy()))
    return states


class WeightsChanged(RuntimeError):
    """The diagnosis's call of the loss assigned trainable weights it was trusted to only read."""


def _fingerprint(variable: Any) -> int:
    return zlib.crc32(np.ascontiguousarray(variable.numpy()).data)


@contextlib.contextmanager
def preserved(model: Any, moves_weights: bool = True) -> Iterator[None]:
    """Run the body; afterwards the model's and its metrics' variables and the random number
    generators are as they were, bit for bit. One copy of the variables is held meanwhile; of
    the trainable ones only when the body `moves_weights` (finite differences): otherwise
    their fingerprints, checked after (WeightsChanged if the body assigned one)."""
    tf = tensorflow()
    variables = model_variables(model)
    trainable = {id(v) for v in variables
                 if getattr(v, "trainable", False)} if not moves_weights else set()
    # A tf.distribute variable's local copies, each read and restored as it is: reading a
    # metric's (sync-on-read) variable whole is a collective the other workers never join.
    kept = [(c, c.numpy()) for v in variables if id(v) not in trainable
            for c in (v.values if isinstance(v, tf.distribute.DistributedValues) else (v,))]
    checked = [(v, _fingerprint(v)) for v in variables if id(v) in trainable]
    randoms = _random_states()
    try:
        yield
    finally:
        for variable, value in kept:
            variable.assign(value)
        for restore, state in randoms:
            restore(state)
    changed = [v.name for v, fingerprint in checked if _fingerprint(v) != fingerprint]
    if changed:
        raise WeightsChanged(f"the loss assigned the trainable weight(s) {', '.join(changed)}"
                             " while it was diagnosed")
