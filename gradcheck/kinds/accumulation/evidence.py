"""The accumulation check's finding: K micro-batches' accumulated gradient against the whole
batch's, and its words."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence, Finding


@dataclasses.dataclass(frozen=True)
class AccumulatedGradient(Evidence):
    """`state`: same (the mean of the micro-batch gradients is the whole batch's), sum (it is
    1/K of it: f sums over its batch), different (per-micro-batch statistics such as batch
    normalisation's, or a mean over a count that differs between micro-batches)."""

    state: str
    micro_batches: int
    error: float
    ratio: float
    batch_norm: bool = False

    def words(self, result: Finding) -> str:
        k = self.micro_batches
        mean = (f"the gradient accumulated over {k} micro-batches (the sum of their gradients"
                f" divided by {k}, as Keras' gradient_accumulation_steps applies it)")
        if self.state == "same":
            return (f"{mean} matches the whole batch's (relative error {self.error:.1e});"
                    f" a loop that adds them without dividing by {k} applies {k} times the"
                    " whole batch's gradient")
        if self.state == "sum":
            return (f"{mean} is 1/{k} of the whole batch's: f sums over its batch, so the"
                    " micro-batch gradients add up to the whole batch's; do not divide by"
                    f" {k}, or make the loss a mean (tf.reduce_mean)")
        why = (" the model's BatchNormalization computes its statistics per micro-batch (the"
               " whole batch's differ: accumulate over a batch-norm-free model, or use"
               " GroupNormalization/LayerNormalization)" if self.batch_norm else
               " f normalises each micro-batch by its own count (a mean over the valid items"
               " of a masked or weighted batch, which differ between micro-batches); divide"
               " each micro-batch's summed loss by the whole batch's count instead")
        return (f"{mean} differs from the whole batch's gradient (relative error"
                f" {self.error:.2g}, {self.ratio:.3g} times along it):{why}")
