"""The strategy check's finding: the gradient a MirroredStrategy step applies against the
single-device gradient of the whole batch, and its words."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence, Finding


@dataclasses.dataclass(frozen=True)
class ReplicaGradient(Evidence):
    """`state`: same, mean (each replica's loss a mean over its share: N times too large),
    regularisation (the model's losses added on every replica), different (per-replica
    statistics, such as batch normalisation's, or randomness); over `replicas` replicas."""

    state: str
    replicas: int
    error: float
    ratio: float
    batch_norm: bool = False
    workers: bool = False  # MultiWorkerMirroredStrategy's local worker processes

    def words(self, result: Finding) -> str:
        n = self.replicas
        strategy = (f"MultiWorkerMirroredStrategy step over {n} worker processes"
                    if self.workers else f"MirroredStrategy step over {n} replicas")
        summed = (f"the gradient a {strategy} applies (the sum of each replica's gradient on"
                  " its share of the batch)")
        if self.state == "same":
            return (f"{summed} matches the single-device gradient of the whole batch (relative"
                    f" error {self.error:.1e})")
        if self.state == "mean":
            return (f"{summed} is {self.ratio:.3g} times the single-device gradient: each"
                    " replica averages its loss over its own share, and the replicas' gradients"
                    " are summed; divide by the global batch size instead:"
                    " tf.nn.compute_average_loss(per_example_loss, global_batch_size=...)")
        if self.state == "regularisation":
            return (f"{summed} counts the model's regularisation losses {n} times, once per"
                    " replica; scale them:"
                    " tf.nn.scale_regularization_loss(tf.add_n(model.losses))")
        why = (" the model's BatchNormalization computes its statistics per replica (use"
               " keras.layers.BatchNormalization(synchronized=True) for the whole batch's)"
               if self.batch_norm else " per-replica statistics or randomness in f")
        return (f"{summed} differs from the single-device gradient of the whole batch (relative"
                f" error {self.error:.2g}, {self.ratio:.3g} times along it):{why}")
