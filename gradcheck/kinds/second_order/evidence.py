"""The second-order check's findings, which the hessian check reports too: the symmetry of the
nested-tape derivative, first-order findings about the gradient retold as second-order ones,
and their words."""

from __future__ import annotations

import dataclasses
from typing import Any

from gradcheck.evidence import Evidence, Finding, internal
from gradcheck.evidence.causes import FirstNonFinite
from gradcheck.evidence.finding import stated_cause

_NOT_SYMMETRIC = ("the second derivative from nested tapes is not symmetric (a second derivative"
                  " of a twice-differentiable f is)")
_WRONG = "a nested custom gradient's second derivative is wrong"


def _non_finite(result: Finding) -> bool:
    """The finding is explained by an op that makes NaN or infinite values."""
    return result.cause is not None and isinstance(result.cause.facts, FirstNonFinite)


@dataclasses.dataclass(frozen=True)
class NotDifferentiated(Evidence):
    """No second derivative was checked: computing the gradient raised `error`, or (None) it
    has no floating-point values."""

    error: str | None = internal(None)

    def words(self, result: Finding) -> str:
        if self.error is None:
            return ("no second derivative checked: the gradient to differentiate has no"
                    " floating-point values")
        return ("no second derivative checked: computing the gradient to differentiate failed"
                f" ({self.error})")


@dataclasses.dataclass(frozen=True)
class Symmetric(Evidence):
    """The nested-tape second derivative is symmetric: max |H - Hᵀ|."""

    max_asymmetry: float = internal(0.0)

    def words(self, result: Finding) -> str:
        return ("the second derivative from nested tapes is symmetric (max |H - Hᵀ|"
                f" {self.max_asymmetry:.1e})")


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

    def words(self, result: Finding) -> str:
        return f"{self.clause(result)}; {stated_cause(result).fix}"

    def clause(self, result: Finding) -> str:
        first, second = self.first, self.second
        wrong = ("NaN or infinite second derivatives, from an op (not a custom gradient)"
                 if _non_finite(result) else _WRONG)
        return (f"{_NOT_SYMMETRIC}: ∂²/∂{first}∂{second} = {self.first_second:.6g} but"
                f" ∂²/∂{second}∂{first} = {self.second_first:.6g}, asymmetric in"
                f" {self.count} of {self.size} elements: {wrong}")


@dataclasses.dataclass(frozen=True)
class ProjectedSymmetry(Evidence):
    """⟨w, H v⟩ against ⟨v, H w⟩ for random w and v, and the difference allowed."""

    w_H_v: float  # the JSON details' names
    v_H_w: float
    allowed: float = internal(0.0)


@dataclasses.dataclass(frozen=True)
class ProjectedSymmetric(ProjectedSymmetry):
    """Symmetric along random directions."""

    def words(self, result: Finding) -> str:
        return ("the second derivative from nested tapes is symmetric along random directions:"
                f" ⟨w, H v⟩ = {self.w_H_v:.6g}, ⟨v, H w⟩ = {self.v_H_w:.6g} (allowed"
                f" difference {self.allowed:.1e})")


@dataclasses.dataclass(frozen=True)
class ProjectedAsymmetric(ProjectedSymmetry):
    """Not symmetric along random directions (what to do is the cause's fix)."""

    def words(self, result: Finding) -> str:
        return f"{self.clause(result)}; {stated_cause(result).fix}"

    def clause(self, result: Finding) -> str:
        return (f"{_NOT_SYMMETRIC}: for random w and v, ⟨w, H v⟩ = {self.w_H_v:.6g} but"
                f" ⟨v, H w⟩ = {self.v_H_w:.6g} (allowed difference {self.allowed:.1e}):"
                f" {_WRONG}")


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

    def words(self, result: Finding) -> str:
        said = self._differentiated() + self.first.message
        if not self.told:
            return said
        cause = stated_cause(result)
        if _non_finite(result):
            return f"{said}; {cause.what}; fix: {cause.fix}"
        return f"{said}; the gradient {cause.what}; {cause.fix}"

    def clause(self, result: Finding) -> str:
        return self._differentiated() + self.first.headline

    def _differentiated(self) -> str:
        first = self.first
        return (f"{first.output or 'the gradient'} differentiated by nested tapes"
                + (f" with respect to {first.input}" if first.input else "")
                + ", against central differences of it: ")


@dataclasses.dataclass(frozen=True)
class MissingInTensorFlow(Retold):
    """g's derivative is None (or raised LookupError: `raised`) because TensorFlow has no
    gradient for a gradient op, as the finding's cause says."""

    raised: bool = internal(False)

    def words(self, result: Finding) -> str:
        return f"{self.clause(result)}; {stated_cause(result).fix}"

    def clause(self, result: Finding) -> str:
        first = self.first
        symptom = ("raises LookupError" if self.raised else
                   f"is None, but finite differences show it depends on {first.input}")
        return (f"{first.output} (the gradient of f) differentiated by nested tapes with respect"
                f" to {first.input} {symptom}: {stated_cause(result).what}")
