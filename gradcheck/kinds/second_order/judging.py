"""Whether a second derivative from nested tapes is symmetric, as that of a twice-differentiable
f is: the whole matrix H against Hᵀ, or ⟨w, H v⟩ against ⟨v, H w⟩ for random w and v."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gradcheck.numerics import judging
from gradcheck.numerics.judging import Comparison
from gradcheck.numerics.projections import PROJECTION_SAFETY
from gradcheck.numerics.tolerances import Tolerance


def judge_symmetry(matrix: np.ndarray, tolerance: Tolerance) -> Comparison | None:
    """H against Hᵀ, or None when H is not finite (NaN against NaN says nothing of symmetry:
    the non-finite finding tells it)."""
    if not np.all(np.isfinite(matrix)):
        return None
    scale = judging.block_scale(matrix, matrix)
    # Rounding makes H[a, b] and H[b, a] differ by far less than the tolerance of H itself.
    allowed = Tolerance(tolerance.atol + tolerance.rtol * scale, 0.0)
    return judging.compare(matrix, matrix.T, allowed)


@dataclass(frozen=True)
class ProjectedVerdict:
    """⟨w, H v⟩ and ⟨v, H w⟩, and the difference allowed between them."""

    w_h_v: float
    v_h_w: float
    allowed: float

    @property
    def difference(self) -> float:
        return abs(self.w_h_v - self.v_h_w)

    @property
    def ok(self) -> bool:
        return self.difference <= self.allowed


def judge_projected_symmetry(hw: Sequence[np.ndarray], hv: Sequence[np.ndarray],
                             w: Sequence[np.ndarray], v: Sequence[np.ndarray],
                             tolerance: Tolerance) -> ProjectedVerdict | None:
    """From Hᵀw and Hᵀv (what tape.gradient of g gives), per argument; None when either is not
    finite."""
    if not all(np.all(np.isfinite(a)) for a in (*hw, *hv)):
        return None
    w_h_v = float(sum(np.sum(a * b) for a, b in zip(hw, v)))  # ⟨Hᵀw, v⟩ = ⟨w, H v⟩
    v_h_w = float(sum(np.sum(a * b) for a, b in zip(hv, w)))
    terms = [a * b for a, b in zip(hw, v)] + [a * b for a, b in zip(hv, w)]
    spread = float(np.sqrt(sum(np.sum(t * t) for t in terms)))
    norms = float(np.sqrt(sum(np.sum(a * a) for a in w) * sum(np.sum(b * b) for b in v)))
    allowed = PROJECTION_SAFETY * (tolerance.atol * norms + tolerance.rtol * spread)
    return ProjectedVerdict(w_h_v, v_h_w, allowed)
