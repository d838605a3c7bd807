"""The gradient a tf.distribute.MirroredStrategy step applies (the cross-replica sum of each
replica's gradient of f on its share of the batch) beside the single-device gradient of f on
the whole batch; and the logical CPU devices that stand in for missing GPUs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.engine.arrays import as_array
from gradcheck.engine.program import Program, flatten_outputs
from gradcheck.engine.runtime import imported, tensorflow
from gradcheck.errors import UsageError


def provide_replicas(replicas: int) -> list[str]:
    """N devices for the replicas: the GPUs when there are enough, else N logical CPUs, set
    up before TensorFlow starts (a usage error once it has started with fewer)."""
    tf = imported()
    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) >= replicas:
        return [f"/gpu:{i}" for i in range(replicas)]
    cpu = tf.config.list_physical_devices("CPU")[0]
    logical = tf.config.get_logical_device_configuration(cpu) or []
    if len(logical) < replicas:
        try:
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
        except RuntimeError:
            raise UsageError(
                f"--strategy mirrored:{replicas} needs {replicas} devices; this process has"
                f" {max(len(logical), 1)} CPU device(s) and {len(gpus)} GPU(s), and TensorFlow has"
                " started, so no logical CPU devices can be added (set them up with"
                " tf.config.set_logical_device_configuration before TensorFlow starts, or use"
                " the command line, whose worker does)") from None
    return [f"/cpu:{i}" for i in range(replicas)]


@dataclass(frozen=True)
class ReplicatedGradients:
    """Per trainable weight: the single-device gradient of f on the whole batch and the sum
    over the replicas of each one's gradient on its share (what the optimizer applies)."""

    names: tuple[str, ...]
    whole: tuple[np.ndarray | None, ...]
    summed: tuple[np.ndarray | None, ...]
    regularisation: tuple[np.ndarray | None, ...] | None  # of the model's own losses


def batch_slots(program: Program) -> list[int]:
    """The arguments that carry the batch: arrays and tensors with a leading dimension."""
    return [i for i, s in enumerate(program.slots)
            if s.argument and len(s.shape) >= 1 and hasattr(s.value, "shape")
            and not callable(s.value)]


def weight_gradients(program: Program, diff_outputs: Sequence[int], weights: Sequence[Any],
                     replacements: dict[int, Any]) -> list[Any]:
    """The gradient of f's summed outputs for WEIGHTS, with the arguments REPLACEMENTS gives
    (by slot) in place of the given ones."""
    tf = tensorflow()
    with tf.GradientTape() as tape:
        leaves = flatten_outputs(program.call(replacements))
        total = tf.add_n([tf.reduce_sum(leaves[k].tensor) for k in diff_outputs])
    return [None if g is None else tf.convert_to_tensor(g)
            for g in tape.gradient(total, list(weights))]


def as_numpy(gradients: Sequence[Any]) -> tuple[np.ndarray | None, ...]:
    return tuple(None if g is None else np.asarray(as_array(g), np.float64) for g in gradients)


def model_losses(program: Program, weights: Sequence[Any]) -> tuple[np.ndarray | None, ...] | None:
    """The gradient of the regularisation losses of a Keras model among f's arguments."""
    tf = tensorflow()
    for slot in program.slots:
        losses = getattr(slot.value, "losses", None)
        if callable(slot.value) and losses:
            with tf.GradientTape() as tape:
                total = tf.add_n([tf.reduce_sum(loss) for loss in slot.value.losses])
            return as_numpy(tape.gradient(total, list(weights)))
    return None


def replicated_gradients(program: Program, diff_outputs: Sequence[int],
                         devices: Sequence[str]) -> ReplicatedGradients:
    tf = tensorflow()
    strategy = tf.distribute.MirroredStrategy(list(devices))
    replicas = len(devices)
    slots = [s for s in program.slots if s.differentiable and not s.argument]
    weights = [s.value for s in slots]
    batch = batch_slots(program)
    shards = {i: tf.stack(tf.split(tf.convert_to_tensor(program.slots[i].value), replicas))
              for i in batch}
    whole = as_numpy(weight_gradients(program, diff_outputs, weights, {}))

    def step() -> Any:
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        mine = {i: tf.gather(shards[i], replica) for i in batch}
        return [tf.zeros(()) if g is None else g
                for g in weight_gradients(program, diff_outputs, weights, mine)]

    per_replica = strategy.run(step)
    summed = tuple(None if w is None else np.sum(
        [np.asarray(as_array(part), np.float64)
         for part in strategy.experimental_local_results(g)], axis=0)
        for g, w in zip(per_replica, whole))
    return ReplicatedGradients(tuple(s.name for s in slots), whole, summed,
                               model_losses(program, weights))
