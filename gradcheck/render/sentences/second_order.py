"""Sentences of second derivatives: the second-order and hessian checks."""

from __future__ import annotations

from gradcheck.evidence.causes import FirstNonFinite
from gradcheck.evidence.second_order import (
    Asymmetric,
    MissingInTensorFlow,
    NoArgument,
    NotDifferentiated,
    ProjectedAsymmetric,
    ProjectedSymmetric,
    SecondOrderOf,
    Symmetric,
)
from gradcheck.render.causes import fix, stated_cause, what
from gradcheck.render.sentences.dispatch import clause, sentence
from gradcheck.report import CheckResult

_NOT_SYMMETRIC = ("the second derivative from nested tapes is not symmetric (a second derivative"
                  " of a twice-differentiable f is)")
_WRONG = "a nested custom gradient's second derivative is wrong"


@sentence.register
def _not_differentiated(evidence: NotDifferentiated, result: CheckResult) -> str:
    if evidence.error is None:
        return ("no second derivative checked: the gradient to differentiate has no"
                " floating-point values")
    return ("no second derivative checked: computing the gradient to differentiate failed"
            f" ({evidence.error})")


@sentence.register
def _no_argument(evidence: NoArgument, result: CheckResult) -> str:
    return ("no argument to differentiate twice (variables f reads are not moved for a"
            " Hessian)")


@sentence.register
def _symmetric(evidence: Symmetric, result: CheckResult) -> str:
    return ("the second derivative from nested tapes is symmetric (max |H - Hᵀ|"
            f" {evidence.max_asymmetry:.1e})")


def _non_finite(result: CheckResult) -> bool:
    """The finding is explained by an op that makes NaN or infinite values."""
    return result.cause is not None and isinstance(result.cause.facts, FirstNonFinite)


@clause.register
def _asymmetric_clause(evidence: Asymmetric, result: CheckResult) -> str:
    first, second = evidence.first, evidence.second
    wrong = ("NaN or infinite second derivatives, from an op (not a custom gradient)"
             if _non_finite(result) else _WRONG)
    return (f"{_NOT_SYMMETRIC}: ∂²/∂{first}∂{second} = {evidence.first_second:.6g} but"
            f" ∂²/∂{second}∂{first} = {evidence.second_first:.6g}, asymmetric in"
            f" {evidence.count} of {evidence.size} elements: {wrong}")


@sentence.register
def _asymmetric(evidence: Asymmetric, result: CheckResult) -> str:
    return f"{_asymmetric_clause(evidence, result)}; {fix(stated_cause(result))}"


@sentence.register
def _projected_symmetric(evidence: ProjectedSymmetric, result: CheckResult) -> str:
    return ("the second derivative from nested tapes is symmetric along random directions:"
            f" ⟨w, H v⟩ = {evidence.w_H_v:.6g}, ⟨v, H w⟩ = {evidence.v_H_w:.6g} (allowed"
            f" difference {evidence.allowed:.1e})")


@clause.register
def _projected_asymmetric_clause(evidence: ProjectedAsymmetric, result: CheckResult) -> str:
    return (f"{_NOT_SYMMETRIC}: for random w and v, ⟨w, H v⟩ = {evidence.w_H_v:.6g} but"
            f" ⟨v, H w⟩ = {evidence.v_H_w:.6g} (allowed difference {evidence.allowed:.1e}):"
            f" {_WRONG}")


@sentence.register
def _projected_asymmetric(evidence: ProjectedAsymmetric, result: CheckResult) -> str:
    return f"{_projected_asymmetric_clause(evidence, result)}; {fix(stated_cause(result))}"


def _differentiated(first: CheckResult) -> str:
    return (f"{first.output or 'the gradient'} differentiated by nested tapes"
            + (f" with respect to {first.input}" if first.input else "")
            + ", against central differences of it: ")


@clause.register
def _second_order_of_clause(evidence: SecondOrderOf, result: CheckResult) -> str:
    return _differentiated(evidence.first) + evidence.first.headline


@sentence.register
def _second_order_of(evidence: SecondOrderOf, result: CheckResult) -> str:
    said = _differentiated(evidence.first) + evidence.first.message
    if not evidence.told:
        return said
    cause = stated_cause(result)
    if _non_finite(result):
        return f"{said}; {what(cause)}; fix: {fix(cause)}"
    return f"{said}; the gradient {what(cause)}; {fix(cause)}"


@clause.register
def _missing_in_tensorflow_clause(evidence: MissingInTensorFlow, result: CheckResult) -> str:
    first: CheckResult = evidence.first
    symptom = ("raises LookupError" if evidence.raised else
               f"is None, but finite differences show it depends on {first.input}")
    return (f"{first.output} (the gradient of f) differentiated by nested tapes with respect to"
            f" {first.input} {symptom}: {what(stated_cause(result))}")


@sentence.register
def _missing_in_tensorflow(evidence: MissingInTensorFlow, result: CheckResult) -> str:
    return f"{_missing_in_tensorflow_clause(evidence, result)}; {fix(stated_cause(result))}"
