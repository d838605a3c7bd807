"""Sentences of the vjp check: tape.gradient's VJP against uᵀJ from finite differences."""

from __future__ import annotations

from gradcheck.evidence.vjp import VjpMatch, VjpMismatch, VjpSkipped, VjpSymmetric
from gradcheck.render.sentences.dispatch import clause, sentence
from gradcheck.render.sentences.jacobian import convention, disagree, disagree_clause
from gradcheck.report import CheckResult

VJP = "tape.gradient(..., output_gradients=u)"
_VJP_LEAD = f"{VJP} differs from uᵀJ (finite differences)"


@sentence.register
def _vjp_match(evidence: VjpMatch, result: CheckResult) -> str:
    return (f"{VJP} matches uᵀJ from finite differences (max abs err {result.max_abs_err:.1e},"
            f" {result.max_rel_err:.1e} of max |uᵀJ|, {result.excess:.2g} of the allowed"
            " error)")


@sentence.register
def _vjp_mismatch(evidence: VjpMismatch, result: CheckResult) -> str:
    return disagree(_VJP_LEAD, ("tape.gradient", "uᵀJ"), evidence.disagreement, result)


@clause.register
def _vjp_mismatch_clause(evidence: VjpMismatch, result: CheckResult) -> str:
    return disagree_clause(_VJP_LEAD, evidence.disagreement)


@sentence.register
def _vjp_symmetric(evidence: VjpSymmetric, result: CheckResult) -> str:
    return convention(VJP, evidence.symmetric_perturbations, evidence.elementwise_size, result)


@sentence.register
def _vjp_skipped(evidence: VjpSkipped, result: CheckResult) -> str:
    return f"no VJP for {result.input}: its gradient is broken (see the checks above)"
