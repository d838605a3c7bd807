"""Sentences about connection and gradient shapes."""

from __future__ import annotations

from gradcheck.evidence.connected import Connected, GradShape
from gradcheck.render.sentences.dispatch import sentence
from gradcheck.report import CheckResult, Relation


@sentence.register
def _connected(evidence: Connected, result: CheckResult) -> str:
    sparse = (" (tape.gradient returned IndexedSlices, densified for the checks)"
              if evidence.indexed_slices else "")
    return f"{evidence.output} is connected to {evidence.input}{sparse}"


@sentence.register
def _grad_shape(evidence: GradShape, result: CheckResult) -> str:
    said = (f"the gradient of {evidence.output} with respect to {evidence.input} has shape"
            f" {evidence.gradient_shape}, but {evidence.input} has shape {evidence.input_shape}:"
            " a gradient must have its source's shape")
    attributed = result.attributed_to
    if attributed is not None and attributed.relation == Relation.TENSORFLOW_GRADIENT:
        return said  # TensorFlow's own grad_fn, not the user's: the attribution says which
    return (f"{said}; a tf.custom_gradient grad_fn must return uᵀJ with its input's shape,"
            " e.g. tf.linalg.matvec(J, upstream, transpose_a=True)")
