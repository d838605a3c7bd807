"""Evidence of second derivatives (second-order and hessian checks): the symmetry of the
nested-tape derivative, first-order findings about the gradient retold as second-order ones."""

from __future__ import annotations

import dataclasses
from typing import Any

from gradcheck.evidence import Evidence, internal


@dataclasses.dataclass(frozen=True)
class NotDifferentiated(Evidence):
    """No second derivative was checked: computing the gradient raised `error`, or (None) it
    has no floating-point values."""

    error: str | None = internal(None)


@dataclasses.dataclass(frozen=True)
class NoArgument(Evidence):
    """A Hessian with no argument to move (only variables)."""


@dataclasses.dataclass(frozen=True)
class Symmetric(Evidence):
    """The nested-tape second derivative is symmetric: max |H - Hᵀ|."""

    max_asymmetry: float = internal(0.0)


@dataclasses.dataclass(frozen=True)
class Asymmetric(Evidence):
    """H[a, b] (∂²/∂`first`∂`second`) differs from H[b, a] in `count` of `size` elements (what
    to do is the cause's fix)."""

    max_asymmetry: float
    first: str = internal("")
    second: str = internal("")
    first_second: float = internal(0.0)
    second_first: float = internal(0.0)
    count: int = internal(0)
    size: int = internal(0)


@dataclasses.dataclass(frozen=True)
class ProjectedSymmetry(Evidence):
    """⟨w, H v⟩ against ⟨v, H w⟩ for random w and v, and the difference allowed."""

    w_H_v: float  # the JSON details' names
    v_H_w: float
    allowed: float = internal(0.0)


@dataclasses.dataclass(frozen=True)
class ProjectedSymmetric(ProjectedSymmetry):
    """Symmetric along random directions."""


@dataclasses.dataclass(frozen=True)
class ProjectedAsymmetric(ProjectedSymmetry):
    """Not symmetric along random directions (what to do is the cause's fix)."""


@dataclasses.dataclass(frozen=True)
class Retold(Evidence):
    """A first-order finding about the gradient g of f (`first`, a CheckResult: the evidence
    layer lies below the report's) told as one about f's second derivative; its JSON
    `details` are those of `first`'s evidence."""

    first: Any = internal(None)

    def underlying(self) -> Evidence:
        evidence = self.first.evidence
        return self if evidence is None else evidence.underlying()

    def published(self) -> dict[str, Any]:
        evidence = self.first.evidence
        return {} if evidence is None else evidence.published()


@dataclasses.dataclass(frozen=True)
class SecondOrderOf(Retold):
    """`first` as found by checking g against central differences of it; `told` when it
    failed and the finding's cause says what that means for the second derivative."""

    told: bool = internal(False)


@dataclasses.dataclass(frozen=True)
class MissingInTensorFlow(Retold):
    """g's derivative is None (or raised LookupError: `raised`) because TensorFlow has no
    gradient for a gradient op, as the finding's cause says."""

    raised: bool = internal(False)
