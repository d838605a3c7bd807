"""Evidence of the vjp check: tape.gradient's VJP compared with uᵀJ from finite differences."""

from __future__ import annotations

import dataclasses
from typing import Any

from gradcheck.evidence import Evidence, internal
from gradcheck.evidence.jacobian import Disagreement, SymmetricPerturbations


@dataclasses.dataclass(frozen=True)
class VjpEvidence(Evidence):
    """tape.gradient's VJP next to uᵀJ from finite differences (when small enough to show)."""

    vjp: list[Any] | None
    finite_difference: list[Any] | None


@dataclasses.dataclass(frozen=True)
class VjpMatch(VjpEvidence):
    """The VJP matches uᵀJ."""


@dataclasses.dataclass(frozen=True)
class VjpMismatch(VjpEvidence):
    disagreement: Disagreement | None = internal()


@dataclasses.dataclass(frozen=True)
class VjpSymmetric(VjpEvidence):
    symmetric_perturbations: SymmetricPerturbations | None = None
    elementwise_size: int = internal(0)


@dataclasses.dataclass(frozen=True)
class VjpSkipped(Evidence):
    """No VJP: the input's gradient is broken (raised, or the wrong shape)."""
