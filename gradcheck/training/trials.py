"""Fixes tried on a failing training step without the user's code, where the fix is in the
training state rather than in the step's graph: the previous update recomputed from the
optimizer's state with another epsilon or learning rate. Each trial runs the step once (a
forward and backward pass) with the weights changed, then puts them back bit for bit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gradcheck.engine.arrays import as_array
from gradcheck.engine.runtime import silenced_stderr_fd, tensorflow
from gradcheck.engine.variables import weight_path_in
from gradcheck.evidence.causes.sources import (
    Change,
    PreviousUpdate,
    ScheduleSpike,
    SwappedArguments,
    Trial,
)

# A schedule whose rate rises this many times from one step to the next spikes (a linear
# warm-up rises at most twofold after its first step).
_JUMP = 10.0
# How many of the last steps a schedule is read at.
_SCHEDULE_STEPS = 10_000
# An Adam-like step moves a weight by about its learning rate: this many times more is the
# optimizer dividing by almost nothing (an epsilon its dtype cannot hold beside sqrt(v)).
_RUNAWAY = 10.0


def _optimizer_state(optimizer: Any, variable: Any, slot: str) -> Any:
    """A slot of `optimizer` for `variable` (Keras 3's lists, tf-keras' get_slot)."""
    lists = {"m": "_momentums", "v": "_velocities"}
    found = getattr(optimizer, lists.get(slot, ""), None)
    if found is not None:
        index = optimizer._get_variable_index(variable)
        return found[index]
    getter = getattr(optimizer, "get_slot", None)
    return getter(variable, slot) if getter is not None else None


def _adam_update(optimizer: Any, variable: Any, epsilon: float, scale: float = 1.0
                 ) -> np.ndarray | None:
    """The update Adam made to `variable` at its last step, recomputed from m and v in
    float64 with `epsilon` (and the learning rate times `scale`)."""
    m, v = (_optimizer_state(optimizer, variable, s) for s in ("m", "v"))
    if m is None or v is None:
        return None
    step = float(as_array(optimizer.iterations))
    if step < 1:
        return None
    beta_1, beta_2 = float(optimizer.beta_1), float(optimizer.beta_2)
    rate = float(as_array(optimizer.learning_rate)) * scale
    alpha = rate * np.sqrt(1 - beta_2 ** step) / (1 - beta_1 ** step)
    m_value, v_value = as_array(m), as_array(v)
    held = float(np.asarray(epsilon, dtype=v_value.dtype))  # 1e-7 is 1.19e-7 in float16
    return np.asarray(m_value.astype(np.float64) * alpha
                      / (np.sqrt(v_value.astype(np.float64)) + held))


def _finite_step(run: Callable[[], Any], weights: Sequence[Any]) -> tuple[bool, float | None]:
    tf = tensorflow()
    with silenced_stderr_fd(), tf.GradientTape() as tape:
        loss = run()
    gradients = [g for g in tape.gradient(loss, list(weights)) if g is not None]
    values = [as_array(tf.convert_to_tensor(g)) for g in gradients]
    finite = bool(np.all(np.isfinite(as_array(loss)))) and all(
        np.all(np.isfinite(v)) for v in values)
    largest = max((float(np.max(np.abs(v))) for v in values if v.size), default=None)
    return finite, largest if finite else None


def adam_like(optimizer: Any) -> bool:
    """An optimizer whose last update previous_update can recompute (Adam's m and v)."""
    return optimizer is not None and hasattr(optimizer, "beta_2")


def previous_update(model: Any, optimizer: Any, run: Callable[[], Any]) -> PreviousUpdate | None:
    """When the last update of an Adam-like optimizer moved a weight far more than its
    learning rate: that update, and the step run again with it recomputed (a larger epsilon,
    a smaller learning rate). The weights are assigned for each trial and restored exactly."""
    if not adam_like(optimizer):
        return None
    weights = list(model.trainable_variables)
    epsilon = float(getattr(optimizer, "epsilon", 1e-7) or 1e-7)
    try:
        updates = [_adam_update(optimizer, w, epsilon) for w in weights]
        rate = float(as_array(optimizer.learning_rate))
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    if not rate or any(u is None for u in updates) or not weights:
        return None
    moved = [float(np.max(np.abs(u))) if u is not None and u.size else 0.0 for u in updates]
    largest = int(np.argmax(moved))
    if moved[largest] < _RUNAWAY * rate:
        return None
    dtype = str(tensorflow().as_dtype(weights[largest].dtype).name)
    larger = max(epsilon * 1e3, 1e-4)
    trials = []
    for change, value, new_epsilon, scale in ((Change.LARGER_EPSILON, larger, larger, 1.0),
                                              (Change.SMALLER_RATE, rate / 10, epsilon, 0.1)):
        replaced = [_adam_update(optimizer, w, new_epsilon, scale) for w in weights]
        finite, gradient = _with_weights(weights, updates, replaced, run)
        trials.append(Trial(change, finite, gradient, value=value))
    return PreviousUpdate(
        trials=tuple(trials), optimizer=type(optimizer).__name__,
        weight=weight_path_in(weights[largest], model), moved=moved[largest],
        ratio=moved[largest] / rate, learning_rate=rate, epsilon=epsilon, dtype=dtype)


def _with_weights(weights: Sequence[Any], made: Sequence[Any], replaced: Sequence[Any],
                  run: Callable[[], Any]) -> tuple[bool, float | None]:
    """The step run with each weight's last update `made` swapped for `replaced`; the weights
    are put back exactly afterwards."""
    kept = [w.numpy() for w in weights]
    try:
        for weight, value, old, new in zip(weights, kept, made, replaced):
            moved = value.astype(np.float64) + old - new
            weight.assign(moved.astype(value.dtype))
        return _finite_step(run, weights)
    finally:
        for weight, value in zip(weights, kept):
            weight.assign(value)


def schedule_spike(optimizer: Any) -> ScheduleSpike | None:
    """The step where the optimizer's learning-rate schedule last jumped (a rise of _JUMP times
    or more from one step to the next), before the updates that led to this step."""
    schedule = getattr(optimizer, "_learning_rate", None)
    if schedule is None or not callable(schedule) or hasattr(schedule, "assign"):
        return None
    try:
        last = int(as_array(optimizer.iterations))
        first = max(0, last - _SCHEDULE_STEPS)
        rates = [float(as_array(schedule(step))) for step in range(first, last)]
    except Exception:  # noqa: BLE001 - a schedule that cannot be read at a step tells nothing
        return None
    jumps = [k for k in range(1, len(rates)) if rates[k - 1] > 0
             and rates[k] >= _JUMP * rates[k - 1]]
    if not jumps:
        return None
    k = jumps[-1]
    return ScheduleSpike(schedule=type(schedule).__name__, step=first + k, before=rates[k - 1],
                         after=rates[k], last=rates[-1])


def swapped_arguments(model: Any, x: Any, y: Any, argument: str) -> SwappedArguments | None:
    """The model's compiled loss function called with its two arguments the other way round
    (its predictions first), and whether the step's loss and gradient are then finite."""
    tf = tensorflow()
    loss = getattr(model, "loss", None)
    if not callable(loss) or y is None:
        return None

    def run() -> Any:
        predictions = model(x, training=True)
        return tf.reduce_mean(loss(predictions, tf.cast(y, predictions.dtype)))

    try:
        finite, largest = _finite_step(run, model.trainable_variables)
    except Exception:  # noqa: BLE001 - a loss that cannot be called so is not tried
        return None
    return SwappedArguments(trials=(Trial(Change.SWAPPED_ARGUMENTS, finite, largest),),
                            argument=argument)
