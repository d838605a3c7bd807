"""Sentences of the jacobian check (autodiff's Jacobian block against finite differences),
and the disagreement and symmetric-convention wording the vjp check shares."""

from __future__ import annotations

from gradcheck.evidence.jacobian import (
    Disagreement,
    JacobianInconclusive,
    JacobianMatch,
    JacobianMismatch,
    JacobianSymmetric,
    SymmetricNote,
    SymmetricPerturbations,
    TapeJacobianFailed,
)
from gradcheck.render.sentences.dispatch import clause, sentence
from gradcheck.report import CheckResult
from gradcheck.spelling import format_index


@sentence.register
def _match(evidence: JacobianMatch, result: CheckResult) -> str:
    return (f"autodiff matches finite differences (max abs err {result.max_abs_err:.1e},"
            f" {result.max_rel_err:.1e} of max |J|; the worst element uses"
            f" {result.excess:.2g} of its allowed error atol={evidence.atol:g} +"
            f" rtol={evidence.rtol:g}·|J| + the finite-difference error estimate)")


@clause.register
def _inconclusive_clause(evidence: JacobianInconclusive, result: CheckResult) -> str:
    return (f"inconclusive: finite differences are too noisy here to confirm autodiff (their"
            f" error estimate reaches {evidence.fd_error_estimate:.2g} against |J| up to"
            f" {evidence.largest:.2g}; autodiff differs by up to {result.max_abs_err:.2g})")


@sentence.register
def _inconclusive(evidence: JacobianInconclusive, result: CheckResult) -> str:
    return (f"{_inconclusive_clause(evidence, result)}; check f's precision (--dtype) or the"
            " step (--eps)")


def disagree_clause(lead: str, disagreement: Disagreement | None) -> str:
    assert disagreement is not None
    return f"{lead} in {disagreement.n_bad} of {disagreement.size} elements"


def _symmetric_note(note: SymmetricNote | None) -> str:
    """Why the convention does not excuse a failure on a square-matrix input (nothing when
    it was never in question: autodiff not symmetric and no agreement)."""
    if note is None or (not note.agrees and not note.autodiff_symmetric):
        return ""
    if not note.agrees:
        return (f"; under symmetric perturbations E_ij + E_ji it still disagrees (worst"
                f" {format_index(note.worst_index)}, {note.excess:.3g}× the allowed error),"
                " so this is not TensorFlow's symmetric-matrix convention")
    return ("; it agrees under symmetric perturbations E_ij + E_ji, but autodiff is not"
            " symmetric, so it is not the symmetrised gradient of TensorFlow's convention"
            " (a transposed gradient?)")


def disagree(lead: str, names: tuple[str, str], disagreement: Disagreement | None,
             result: CheckResult) -> str:
    assert disagreement is not None
    return (f"{disagree_clause(lead, disagreement)}; worst"
            f" {format_index(result.worst_index or ())}: {names[0]} {disagreement.actual:.6g},"
            f" {names[1]} {disagreement.expected:.6g} ({result.excess:.3g}× the allowed error)"
            + _symmetric_note(disagreement.symmetric))


_JACOBIAN_LEAD = "autodiff and finite differences disagree"


@sentence.register
def _jacobian_mismatch(evidence: JacobianMismatch, result: CheckResult) -> str:
    return disagree(_JACOBIAN_LEAD, ("autodiff", "finite differences"), evidence.disagreement,
                     result)


@clause.register
def _jacobian_mismatch_clause(evidence: JacobianMismatch, result: CheckResult) -> str:
    return disagree_clause(_JACOBIAN_LEAD, evidence.disagreement)


def convention(what: str, found: SymmetricPerturbations | None, size: int,
               result: CheckResult) -> str:
    """The warning that replaces a failure when autodiff is the symmetrised gradient."""
    assert found is not None
    name = result.input
    return (
        f"{what} differs from element-by-element finite differences in"
        f" {found.elementwise_mismatches} of {size} elements (max abs err"
        f" {found.elementwise_max_abs_err:.3g}), but it is their symmetric part (G + Gᵀ)/2 and"
        f" matches finite differences under symmetric perturbations E_ij + E_ji of {name} (max"
        f" abs err {found.max_abs_err:.1e}, {found.max_rel_err:.1e} of the largest entry,"
        f" {result.excess:.2g}× the allowed error, over {found.directions} directions):"
        " TensorFlow's convention for ops on symmetric matrices (Cholesky, logdet,"
        " cholesky_solve...), which read one triangle and return the symmetric part. Correct"
        f" when {name} is symmetric; wrong if {name} is meant to be a general matrix")


@sentence.register
def _jacobian_symmetric(evidence: JacobianSymmetric, result: CheckResult) -> str:
    return convention(f"tape.jacobian of {result.output}", evidence.symmetric_perturbations,
                       evidence.elementwise_size, result)


@sentence.register
def _tape_jacobian_failed(evidence: TapeJacobianFailed, result: CheckResult) -> str:
    if evidence.error:
        return f"tape.jacobian failed: {evidence.error}"
    return "tape.jacobian returned None although tape.gradient did not"
