"""Evidence of whether autodiff connects an output to an input, and of a gradient's shape, and
its words."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence, internal
from gradcheck.evidence.finding import Finding


@dataclasses.dataclass(frozen=True)
class Connected(Evidence):
    """tape.gradient gave a gradient of `output` with respect to `input`."""

    output: str = internal("")
    input: str = internal("")
    # tape.gradient returned IndexedSlices, densified for the checks.
    indexed_slices: bool = internal(False)

    def words(self, result: Finding) -> str:
        sparse = (" (tape.gradient returned IndexedSlices, densified for the checks)"
                  if self.indexed_slices else "")
        return f"{self.output} is connected to {self.input}{sparse}"


@dataclasses.dataclass(frozen=True)
class GradShape(Evidence):
    """The gradient of `output` with respect to `input` has the wrong shape."""

    gradient_shape: tuple[int, ...] | None
    input_shape: tuple[int, ...]
    output: str = internal("")
    input: str = internal("")

    def words(self, result: Finding) -> str:
        said = (f"the gradient of {self.output} with respect to {self.input} has shape"
                f" {self.gradient_shape}, but {self.input} has shape {self.input_shape}: a"
                " gradient must have its source's shape")
        attributed = result.attributed_to
        # Relation.TENSORFLOW_GRADIENT, by its spelling (gradcheck.report is a layer above).
        if attributed is not None and attributed.relation == "tensorflow-gradient":
            return said  # TensorFlow's own grad_fn, not the user's: the attribution says which
        return (f"{said}; a tf.custom_gradient grad_fn must return uᵀJ with its input's shape,"
                " e.g. tf.linalg.matvec(J, upstream, transpose_a=True)")
