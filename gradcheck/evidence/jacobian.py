"""Evidence of the jacobian check: autodiff's Jacobian block compared with finite differences
(Disagreement and the Symmetric* facts are shared with the vjp check)."""

from __future__ import annotations

import dataclasses
from typing import Any

from gradcheck.evidence import Evidence, internal


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


@dataclasses.dataclass(frozen=True)
class JacobianInconclusive(JacobianEvidence):
    """Finite differences too noisy to confirm autodiff; |J| up to `largest`."""

    largest: float = internal(0.0)


@dataclasses.dataclass(frozen=True)
class JacobianMismatch(JacobianEvidence):
    disagreement: Disagreement | None = internal()


@dataclasses.dataclass(frozen=True)
class JacobianSymmetric(JacobianEvidence):
    """Autodiff is the symmetric part of the element-wise gradient (TensorFlow's convention)."""

    symmetric_perturbations: SymmetricPerturbations | None = None
    elementwise_size: int = internal(0)


@dataclasses.dataclass(frozen=True)
class TapeJacobianFailed(Evidence):
    """tape.jacobian gave nothing (with its error, when it raised)."""

    error: str | None = internal()
