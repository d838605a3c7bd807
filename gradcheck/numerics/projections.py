"""One random projection ⟨Jᵀu, d⟩ (autodiff) against central differences of ⟨u, f⟩ along d,
and what it is allowed to be off by (NumPy only)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gradcheck.numerics.differences import (
    PROJECTION_SMALLER_STEPS,
    central_quotient,
    crossed_kink,
    extrapolate,
    rounding_error,
    second_difference,
)
from gradcheck.numerics.tolerances import ERROR_ESTIMATE_SAFETY, Tolerance

# Random-sign terms (tolerated per-element errors seen through a random projection) are allowed
# this many standard deviations before a probe fails.
PROJECTION_SAFETY = 5.0
# Input-sized arrays are reduced this many elements at a time, without input-sized temporaries.
CHUNK = 1 << 20

# ⟨u, f(x + step·d)⟩ and Σ|u||f| there (the scale of its rounding error), for a step.
Along = Callable[[float], tuple[float, float]]


@dataclass(frozen=True)
class Projection:
    """One comparison of ⟨Jᵀu, d⟩ (autodiff) with the central difference of ⟨u, f⟩ along d."""

    autodiff: float
    finite_difference: float
    error_estimate: float
    allowed: float
    # finite_difference is Richardson's (4 d(t) - d(2t)) / 3 rather than d(t).
    extrapolated: bool = False
    # Half the gap between the one-sided differences at x: O(t) where f is smooth along d,
    # the size of a slope change where the step crosses a kink (ReLU) close to x.
    asymmetry: float = 0.0
    # What rounding alone can put into d(t) (and so into the two above).
    rounding: float = 0.0
    # The step t of the finite differences (smaller than the default after a kink).
    step: float = 0.0

    @property
    def inconsistency(self) -> float:
        """How far the finite differences disagree with themselves beyond rounding."""
        return (max(self.error_estimate, self.asymmetry)
                - ERROR_ESTIMATE_SAFETY * self.rounding)

    @property
    def error(self) -> float:
        return abs(self.autodiff - self.finite_difference)

    @property
    def ok(self) -> bool:
        return bool(self.error <= self.allowed)


@dataclass(frozen=True)
class Allowance:
    """Autodiff's ⟨Jᵀu, d⟩ and the part of the allowance that does not depend on the
    differences (random-sign rounding of J's entries seen through the projection)."""

    autodiff: float
    base: float
    rtol: float

    def allowed(self, finite_difference: float, estimate: float) -> float:
        return (self.base + self.rtol * abs(finite_difference)
                + ERROR_ESTIMATE_SAFETY * estimate)


def allowance(pairs: Sequence[tuple[np.ndarray, np.ndarray]], upstreams: Sequence[np.ndarray],
              tolerance: Tolerance) -> Allowance:
    """From (Jᵀu, d) per input, restricted to the elements moved, and the upstreams u."""
    autodiff = sum(float(np.vdot(g, d)) for g, d in pairs)
    spread = float(np.sqrt(sum(float(np.sum((g * d) ** 2)) for g, d in pairs)))
    norm_u = float(np.sqrt(sum(float(np.vdot(u, u)) for u in upstreams)))
    norm_d = float(np.sqrt(sum(float(np.vdot(d, d)) for _, d in pairs)))
    return Allowance(autodiff, PROJECTION_SAFETY * (tolerance.atol * norm_u * norm_d
                                                    + tolerance.rtol * spread), tolerance.rtol)


def measure(along: Along, centre: float, step: float, eps: float,
            allowed: Allowance) -> Projection:
    """Central differences with step `step` (⟨u, f(x)⟩ = `centre`); x ± 2·step, and
    Richardson, only when x ± step is in doubt."""
    plus1, scale_p1 = along(step)
    minus1, scale_m1 = along(-step)
    d1 = float(central_quotient(plus1, minus1, step))
    rounding = float(rounding_error(eps, step, scale_p1, scale_m1))
    asymmetry = float(second_difference(plus1, centre, minus1)) / (2 * step)
    first = Projection(allowed.autodiff, d1, rounding, allowed.allowed(d1, rounding),
                       asymmetry=asymmetry, rounding=rounding, step=step)
    if first.ok:
        return first
    plus2, scale_p2 = along(2.0 * step)
    minus2, scale_m2 = along(-2.0 * step)
    extrapolated, estimate = (float(v) for v in extrapolate(
        d1, central_quotient(plus2, minus2, 2.0 * step),
        rounding_error(eps, step, scale_p1, scale_m1, scale_p2, scale_m2)))
    return Projection(allowed.autodiff, extrapolated, estimate,
                      allowed.allowed(extrapolated, estimate), extrapolated=True,
                      asymmetry=asymmetry, rounding=rounding, step=step)


def project(along: Along, centre: float, step: float, eps: float, allowed: Allowance,
            smaller_steps: Sequence[float] = PROJECTION_SMALLER_STEPS) -> Projection:
    """`measure`, then smaller steps while the discrepancy may be a kink the step crossed;
    the first that passes, else the last (failing with the kink, if any, no longer crossed)."""
    result = measure(along, centre, step, eps, allowed)
    if result.ok or not crossed_kink(result.error, result.inconsistency):
        return result
    for divisor in smaller_steps:
        result = measure(along, centre, step / divisor, eps, allowed)
        if result.ok:
            break
    return result


def remainder(whole: Projection, part: Projection,
              allowance_of_rest: Callable[[], Allowance]) -> Projection | None:
    """The projection on the rest of a measured whole after a measured part, deduced (the
    differences are linear in the direction) when both were extrapolated from one step."""
    if not (whole.extrapolated and part.extrapolated and whole.step == part.step):
        return None
    allowed = allowance_of_rest()
    finite_difference = whole.finite_difference - part.finite_difference
    estimate = whole.error_estimate + part.error_estimate
    return Projection(allowed.autodiff, finite_difference, estimate,
                      allowed.allowed(finite_difference, estimate), extrapolated=True,
                      step=part.step)


def abs_inner(a: np.ndarray, b: np.ndarray) -> float:
    """Σ|aᵢ||bᵢ|."""
    a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
    return float(sum(np.dot(np.abs(a[i:i + CHUNK]), np.abs(b[i:i + CHUNK]))
                     for i in range(0, a.size, CHUNK)))
