"""Sentences of the accumulation check."""

from __future__ import annotations

from gradcheck.evidence.accumulation import AccumulatedGradient
from gradcheck.render.sentences.dispatch import sentence
from gradcheck.report import CheckResult


@sentence.register
def _accumulated(evidence: AccumulatedGradient, result: CheckResult) -> str:
    k = evidence.micro_batches
    mean = (f"the gradient accumulated over {k} micro-batches (the sum of their gradients"
            f" divided by {k}, as Keras' gradient_accumulation_steps applies it)")
    if evidence.state == "same":
        return (f"{mean} matches the whole batch's (relative error {evidence.error:.1e});"
                f" a loop that adds them without dividing by {k} applies {k} times the"
                " whole batch's gradient")
    if evidence.state == "sum":
        return (f"{mean} is 1/{k} of the whole batch's: f sums over its batch, so the"
                " micro-batch gradients add up to the whole batch's; do not divide by"
                f" {k}, or make the loss a mean (tf.reduce_mean)")
    why = (" the model's BatchNormalization computes its statistics per micro-batch (the"
           " whole batch's differ: accumulate over a batch-norm-free model, or use"
           " GroupNormalization/LayerNormalization)" if evidence.batch_norm else
           " f normalises each micro-batch by its own count (a mean over the valid items of"
           " a masked or weighted batch, which differ between micro-batches); divide each"
           " micro-batch's summed loss by the whole batch's count instead")
    return (f"{mean} differs from the whole batch's gradient (relative error"
            f" {evidence.error:.2g}, {evidence.ratio:.3g} times along it):{why}")
