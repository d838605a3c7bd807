"""Evidence of whether autodiff connects an output to an input, and of a gradient's shape."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence, internal


@dataclasses.dataclass(frozen=True)
class Connected(Evidence):
    """tape.gradient gave a gradient of `output` with respect to `input`."""

    output: str = internal("")
    input: str = internal("")
    # tape.gradient returned IndexedSlices, densified for the checks.
    indexed_slices: bool = internal(False)


@dataclasses.dataclass(frozen=True)
class GradShape(Evidence):
    """The gradient of `output` with respect to `input` has the wrong shape."""

    gradient_shape: tuple[int, ...] | None
    input_shape: tuple[int, ...]
    output: str = internal("")
    input: str = internal("")
