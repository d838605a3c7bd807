"""Evidence of the jacobian check: autodiff's Jacobian block compared with finite differences,
and its words (Disagreement, the Symmetric* facts and their wording are shared with the vjp
check)."""

from __future__ import annotations

import dataclasses
from typing import Any

from gradcheck.evidence import Evidence, internal
from gradcheck.evidence.finding import Finding
from gradcheck.evidence.notes import Note
from gradcheck.spelling import format_index


@dataclasses.dataclass(frozen=True)
class SymmetricNote:
    """What symmetric perturbations E_ij + E_ji said about a failure on a square matrix."""

    agrees: bool
    autodiff_symmetric: bool
    worst_index: tuple[int, ...] | None
    excess: float


@dataclasses.dataclass(frozen=True)
class Disagreement:
    """How many elements disagree, and the worst one's two values."""

    n_bad: int
    size: int
    actual: float
    expected: float
    symmetric: SymmetricNote | None = None


@dataclasses.dataclass(frozen=True)
class SymmetricPerturbations:
    """Published as `details.symmetric_perturbations` of a convention warning."""

    directions: int
    max_abs_err: float
    max_rel_err: float
    elementwise_max_abs_err: float
    elementwise_max_rel_err: float
    elementwise_mismatches: int


@dataclasses.dataclass(frozen=True)
class JacobianEvidence(Evidence):
    """A (output, input) block judged: both matrices (when small enough to show) and the
    tolerance it was judged with."""

    autodiff: list[Any] | None
    finite_difference: list[Any] | None
    shape: list[int]
    fd_error_estimate: float
    atol: float
    rtol: float


@dataclasses.dataclass(frozen=True)
class JacobianMatch(JacobianEvidence):
    """Autodiff matches finite differences."""

    def words(self, result: Finding) -> str:
        return (f"autodiff matches finite differences (max abs err {result.max_abs_err:.1e},"
                f" {result.max_rel_err:.1e} of max |J|; the worst element uses"
                f" {result.excess:.2g} of its allowed error atol={self.atol:g} +"
                f" rtol={self.rtol:g}·|J| + the finite-difference error estimate)")


@dataclasses.dataclass(frozen=True)
class JacobianInconclusive(JacobianEvidence):
    """Finite differences too noisy to confirm autodiff; |J| up to `largest`."""

    largest: float = internal(0.0)

    def words(self, result: Finding) -> str:
        return (f"{self.clause(result)}; check f's precision (--dtype) or the step (--eps)")

    def clause(self, result: Finding) -> str:
        return (f"inconclusive: finite differences are too noisy here to confirm autodiff (their"
                f" error estimate reaches {self.fd_error_estimate:.2g} against |J| up to"
                f" {self.largest:.2g}; autodiff differs by up to {result.max_abs_err:.2g})")


@dataclasses.dataclass(frozen=True)
class JacobianMismatch(JacobianEvidence):
    disagreement: Disagreement | None = internal()

    def words(self, result: Finding) -> str:
        return disagree(_JACOBIAN_LEAD, ("autodiff", "finite differences"), self.disagreement,
                        result)

    def clause(self, result: Finding) -> str:
        return disagree_clause(_JACOBIAN_LEAD, self.disagreement)


@dataclasses.dataclass(frozen=True)
class JacobianSymmetric(JacobianEvidence):
    """Autodiff is the symmetric part of the element-wise gradient (TensorFlow's convention)."""

    symmetric_perturbations: SymmetricPerturbations | None = None
    elementwise_size: int = internal(0)

    def words(self, result: Finding) -> str:
        return convention(f"tape.jacobian of {result.output}", self.symmetric_perturbations,
                          self.elementwise_size, result)


@dataclasses.dataclass(frozen=True)
class TapeJacobianFailed(Evidence):
    """tape.jacobian gave nothing (with its error, when it raised)."""

    error: str | None = internal()

    def words(self, result: Finding) -> str:
        if self.error:
            return f"tape.jacobian failed: {self.error}"
        return "tape.jacobian returned None although tape.gradient did not"


_JACOBIAN_LEAD = "autodiff and finite differences disagree"


def disagree_clause(lead: str, disagreement: Disagreement | None) -> str:
    """How many elements disagree, after `lead` (the headline of a mismatch)."""
    assert disagreement is not None
    return f"{lead} in {disagreement.n_bad} of {disagreement.size} elements"


def disagree(lead: str, names: tuple[str, str], disagreement: Disagreement | None,
             result: Finding) -> str:
    """A mismatch in full: how many elements disagree, the worst one's two values (`names`
    says whose) and what symmetric perturbations said."""
    assert disagreement is not None
    return (f"{disagree_clause(lead, disagreement)}; worst"
            f" {format_index(result.worst_index or ())}: {names[0]} {disagreement.actual:.6g},"
            f" {names[1]} {disagreement.expected:.6g} ({result.excess:.3g}× the allowed error)"
            + _symmetric_note(disagreement.symmetric))


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


def convention(what: str, found: SymmetricPerturbations | None, size: int,
               result: Finding) -> str:
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


@dataclasses.dataclass(frozen=True)
class ConjugateGradient(Note):
    """Complex `output` is holomorphic in complex `input` (its parts' Jacobian satisfies
    Cauchy–Riemann): TensorFlow's gradient is conj(f'(z))·upstream, shown for one element."""

    output: str
    input: str
    derivative: complex
    gradient: complex

    def words(self) -> str:
        return (f"{self.output} is holomorphic in {self.input}: TensorFlow's gradient is the"
                f" conjugate of its complex derivative, conj(f'(z))·upstream (here f'(z) ="
                f" {_complex(self.derivative)}, so upstream 1 gives {_complex(self.gradient)});"
                " that is TensorFlow's convention, correct for a real loss (docs/vjp.md)")


def _complex(value: complex) -> str:
    return f"{value.real:.6g}{value.imag:+.6g}j"
