"""Autodiff at the points finite differences stepped to: the derivative across one step."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

import numpy as np

from gradcheck.engine.program import Program, flatten_outputs
from gradcheck.engine.runtime import tensorflow


def gradients_along(program: Program, slot_index: int, output_index: int,
                    output_element: tuple[int, ...], element: int, moves: Sequence[float]
                    ) -> np.ndarray | None:
    """∂y[output_element]/∂x at x + m·e_element for each move m: rows (len(moves), *x.shape),
    or None when autodiff gives no gradient there or raises."""
    slot = program.slots[slot_index]
    x = program.value_of(slot_index)
    rows = []
    for move in moves:
        point = x.copy()
        point.reshape(-1)[element] += move
        row = _gradient_at(program, slot_index, point, output_index, output_element)
        if row is None:
            return None
        rows.append(row)
    return np.stack(rows) if rows else np.zeros((0, *slot.shape))


def _gradient_at(program: Program, slot_index: int, point: np.ndarray, output_index: int,
                 output_element: tuple[int, ...]) -> np.ndarray | None:
    tf = tensorflow()
    slot = program.slots[slot_index]
    value = tf.constant(point, dtype=slot.dtype)
    saved = slot.value.numpy() if slot.is_variable else None
    try:
        with tf.GradientTape() as tape:
            if slot.is_variable:
                slot.value.assign(value)
                source = slot.value
                result = program.call()
            else:
                source = value
                tape.watch(value)
                result = program.call({slot_index: value})
            target = flatten_outputs(result)[output_index].tensor
            if output_element:
                target = target[output_element]
        gradient = tape.gradient(target, source)
    except Exception:  # noqa: BLE001 - no verdict from this probe, the comparison stands
        return None
    finally:
        if saved is not None:
            slot.value.assign(saved)
    if gradient is None:
        return None
    return np.asarray(tf.convert_to_tensor(gradient), dtype=np.float64)


@contextmanager
def moved_program(program: Program, slot_index: int, element: int, move: float
                  ) -> Iterator[Program]:
    """The program with one input element moved by `move` (a variable is assigned while the
    context lasts, then restored)."""
    tf = tensorflow()
    slot = program.slots[slot_index]
    point = program.value_of(slot_index)
    point.reshape(-1)[element] += move
    value = tf.constant(point, dtype=slot.dtype)
    if not slot.is_variable:
        slots = list(program.slots)
        slots[slot_index] = replace(slot, value=value)
        yield replace(program, slots=tuple(slots))
        return
    saved = slot.value.numpy()
    slot.value.assign(value)
    try:
        yield program
    finally:
        slot.value.assign(saved)
