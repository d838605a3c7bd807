"""Gradient accumulation: f's gradient on each of K micro-batches of its batch (the first
dimension of its batch arguments), beside its gradient on the whole batch."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gradcheck.engine.program import Program
from gradcheck.engine.runtime import tensorflow
from gradcheck.kinds.strategy.tf import as_numpy, batch_slots, weight_gradients


def micro_batch_gradients(program: Program, diff_outputs: Sequence[int], parts: int
                          ) -> tuple[tuple[np.ndarray | None, ...],
                                     list[tuple[np.ndarray | None, ...]]]:
    """(the whole batch's gradient, each micro-batch's) for the trainable weights f reads."""
    tf = tensorflow()
    weights = [s.value for s in program.slots if s.differentiable and not s.argument]
    batch = batch_slots(program)
    shards = {i: tf.split(tf.convert_to_tensor(program.slots[i].value), parts) for i in batch}
    whole = as_numpy(weight_gradients(program, diff_outputs, weights, {}))
    return whole, [as_numpy(weight_gradients(program, diff_outputs, weights,
                                             {i: shards[i][k] for i in batch}))
                   for k in range(parts)]
