"""A training process's state kept across a live diagnosis: the model's variables (weights,
batch statistics, seed-generator states), its metrics' variables, and the random number
generators (TensorFlow's global generator and op seeds, Python's, NumPy's), put back bitwise."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any

import numpy as np

from gradcheck.tf.runtime import tensorflow


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


@contextlib.contextmanager
def preserved(model: Any) -> Iterator[None]:
    """Run the body; afterwards the model's and its metrics' variables and the random number
    generators are as they were, bit for bit (one copy of the variables is held meanwhile)."""
    tensorflow()
    variables = model_variables(model)
    values = [variable.numpy() for variable in variables]
    randoms = _random_states()
    try:
        yield
    finally:
        for variable, value in zip(variables, values):
            variable.assign(value)
        for restore, state in randoms:
            restore(state)
