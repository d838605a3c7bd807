"""Sentences of the strategy check."""

from __future__ import annotations

from gradcheck.evidence.strategy import ReplicaGradient
from gradcheck.render.sentences.dispatch import sentence
from gradcheck.report import CheckResult


@sentence.register
def _replicas(evidence: ReplicaGradient, result: CheckResult) -> str:
    n = evidence.replicas
    strategy = (f"MultiWorkerMirroredStrategy step over {n} worker processes"
                if evidence.workers else f"MirroredStrategy step over {n} replicas")
    summed = (f"the gradient a {strategy} applies (the sum of each replica's gradient on its"
              " share of the batch)")
    if evidence.state == "same":
        return (f"{summed} matches the single-device gradient of the whole batch (relative"
                f" error {evidence.error:.1e})")
    if evidence.state == "mean":
        return (f"{summed} is {evidence.ratio:.3g} times the single-device gradient: each"
                " replica averages its loss over its own share, and the replicas' gradients"
                " are summed; divide by the global batch size instead:"
                " tf.nn.compute_average_loss(per_example_loss, global_batch_size=...)")
    if evidence.state == "regularisation":
        return (f"{summed} counts the model's regularisation losses {n} times, once per"
                " replica; scale them: tf.nn.scale_regularization_loss(tf.add_n(model.losses))")
    why = (" the model's BatchNormalization computes its statistics per replica (use"
           " keras.layers.BatchNormalization(synchronized=True) for the whole batch's)"
           if evidence.batch_norm else " per-replica statistics or randomness in f")
    return (f"{summed} differs from the single-device gradient of the whole batch (relative"
            f" error {evidence.error:.2g}, {evidence.ratio:.3g} times along it):{why}")
