"""Evidence of the vjp check: tape.gradient's VJP compared with uᵀJ from finite differences,
and its words."""

from __future__ import annotations

import dataclasses
from typing import Any

from gradcheck.evidence import Evidence, internal
from gradcheck.evidence.finding import Finding
from gradcheck.kinds.jacobian.evidence import (
    Disagreement,
    SymmetricPerturbations,
    convention,
    disagree,
    disagree_clause,
)

_VJP = "tape.gradient(..., output_gradients=u)"
_VJP_LEAD = f"{_VJP} differs from uᵀJ (finite differences)"


@dataclasses.dataclass(frozen=True)
class VjpEvidence(Evidence):
    """tape.gradient's VJP next to uᵀJ from finite differences (when small enough to show)."""

    vjp: list[Any] | None
    finite_difference: list[Any] | None


@dataclasses.dataclass(frozen=True)
class VjpMatch(VjpEvidence):
    """The VJP matches uᵀJ."""

    def words(self, result: Finding) -> str:
        return (f"{_VJP} matches uᵀJ from finite differences (max abs err"
                f" {result.max_abs_err:.1e}, {result.max_rel_err:.1e} of max |uᵀJ|,"
                f" {result.excess:.2g} of the allowed error)")


@dataclasses.dataclass(frozen=True)
class VjpMismatch(VjpEvidence):
    disagreement: Disagreement | None = internal()

    def words(self, result: Finding) -> str:
        return disagree(_VJP_LEAD, ("tape.gradient", "uᵀJ"), self.disagreement, result)

    def clause(self, result: Finding) -> str:
        return disagree_clause(_VJP_LEAD, self.disagreement)


@dataclasses.dataclass(frozen=True)
class VjpSymmetric(VjpEvidence):
    symmetric_perturbations: SymmetricPerturbations | None = None
    elementwise_size: int = internal(0)

    def words(self, result: Finding) -> str:
        return convention(_VJP, self.symmetric_perturbations, self.elementwise_size, result)


@dataclasses.dataclass(frozen=True)
class VjpSkipped(Evidence):
    """No VJP: the input's gradient is broken (raised, or the wrong shape)."""

    def words(self, result: Finding) -> str:
        return f"no VJP for {result.input}: its gradient is broken (see the checks above)"
