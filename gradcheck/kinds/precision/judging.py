"""A low-precision gradient judged against its float32 counterpart: underflow, overflow, the
error beyond what the precision explains, and the power-of-two loss scale that fits it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# (largest finite, smallest normal, unit roundoff) per low precision.
RANGES = {"float16": (65504.0, 2.0**-14, 2.0**-11), "bfloat16": (3.39e38, 2.0**-126, 2.0**-8)}
# A gradient is a sum over many rounded products: its norm-wise error may reach this many
# roundoffs of the float32 gradient's norm before it is more than the precision explains.
ROUNDOFFS = 64.0
# The share of the float32 gradient's norm that elements underflowing to 0 or subnormals may
# carry.
UNDERFLOW_SHARE = 0.1
# Errors are judged against at least this fraction of the largest source's float32 gradient
# norm (a gradient zero by construction, an attention key's bias, is cancellation noise in
# either precision), and what underflows against at least LOST_FLOOR of it.
NEGLIGIBLE = 1e-2
LOST_FLOOR = 1e-4
# With only a model's output layer switched to float32, the layers before it still round in
# low precision: a gradient that passes through them (an input's, through a float16 Dense fed
# large values) may keep a few times the error one low-precision pass explains, but nothing
# may overflow or underflow for the float32 head to be the fix.
HEAD_SLACK = 4.0


@dataclass(frozen=True)
class PrecisionVerdict:
    ok: bool
    marginal: bool  # passes, but most of it is subnormal: a smaller gradient would underflow
    lost_norm: float  # the share of float32's gradient norm in elements lost to underflow
    underflow: float  # nonzero in float32, 0 in low precision (share of float32's nonzero)
    subnormal: float  # below the smallest normal, not 0 (same share)
    overflow: float  # finite in float32, inf or NaN in low precision (share of all)
    error: float  # ||low - float32|| / ||float32||, over the elements finite in both
    allowed: float
    loss_scale: float | None  # the power of two that brings float32's gradient into range
    scaled_underflow: float  # what would still underflow at that scale
    bfloat16_serves: bool  # float32's range and bfloat16's roundoff keep this gradient


def faithful_copy(dtype: str, low_value: float, reference_value: float) -> bool:
    """Whether the float32 copy computes f's value (up to what the low precision explains):
    else it is another computation, and its gradient no reference."""
    roundoff = RANGES[dtype][2]
    if not math.isfinite(low_value):  # an overflow in low precision: what the check is for
        return math.isfinite(reference_value)
    return bool(abs(low_value - reference_value)
                <= ROUNDOFFS * roundoff * (abs(reference_value) + 1e-30))


def judge_precision(dtype: str, low: np.ndarray, reference: np.ndarray,
                    scale: float = 1.0, peak: float = 0.0) -> PrecisionVerdict:
    """`low` and `reference` are unscaled gradients; `scale` is the loss scale the low one was
    computed under, at which its range is judged. Errors are relative to the reference's norm,
    or to NEGLIGIBLE (LOST_FLOOR for underflow) of `peak`, the largest float32 gradient
    norm among f's sources, when that is more."""
    largest, smallest, roundoff = RANGES[dtype]
    scale_free = np.asarray(reference, np.float64)
    low = np.asarray(low, np.float64) * scale
    reference = scale_free * scale
    nonzero = (reference != 0) & np.isfinite(reference)
    count = max(int(nonzero.sum()), 1)
    # Subnormals keep an absolute precision (6e-8 in float16), which the error measures; what
    # is lost is what underflows to 0, judged by what it carries of the float32 gradient: tiny
    # elements that underflow change nothing a weight learns.
    lost = nonzero & (low == 0)
    underflow = float(np.sum(lost)) / count
    subnormal = float(np.sum(nonzero & (low != 0) & (np.abs(low) < smallest))) / count
    lost_norm = float(np.linalg.norm(reference[lost])) / max(
        float(np.linalg.norm(reference[nonzero])), LOST_FLOOR * peak * scale, 1e-300)
    overflow = float(np.sum(np.isfinite(reference) & ~np.isfinite(low))) / max(low.size, 1)
    both = np.isfinite(low) & np.isfinite(reference)
    norm = max(float(np.linalg.norm(reference[both])), NEGLIGIBLE * peak * scale)
    error = float(np.linalg.norm((low - reference)[both]) / norm) if norm > 0 else 0.0
    allowed = ROUNDOFFS * roundoff
    ok = overflow == 0 and lost_norm <= UNDERFLOW_SHARE and error <= allowed
    scale_needed, scaled_underflow = _loss_scale(np.abs(scale_free[nonzero]), largest,
                                                 smallest)
    # bfloat16 has float32's range: it keeps what float16 loses to range (not to digits).
    out_of_range = overflow > 0 or lost_norm > UNDERFLOW_SHARE or subnormal > 0.5
    bfloat16 = dtype == "float16" and out_of_range and float(np.min(
        np.abs(scale_free[nonzero]), initial=np.inf)) >= RANGES["bfloat16"][1]
    marginal = ok and subnormal > 0.5
    return PrecisionVerdict(ok, marginal, lost_norm, underflow, subnormal, overflow, error, allowed,
                            scale_needed, scaled_underflow, bool(bfloat16))


def head_explains(dtype: str, low: np.ndarray, reference: np.ndarray, scale: float = 1.0,
                  peak: float = 0.0) -> bool:
    """Whether a gradient taken with only the output layer in float32 is float32's, up to the
    rounding the layers before it still do (HEAD_SLACK)."""
    verdict = judge_precision(dtype, low, reference, scale, peak)
    return (verdict.overflow == 0 and verdict.lost_norm <= UNDERFLOW_SHARE
            and verdict.error <= HEAD_SLACK * verdict.allowed)


def _loss_scale(magnitudes: np.ndarray, largest: float, smallest: float
                ) -> tuple[float | None, float]:
    """The largest power of two that keeps the biggest element below half the largest finite
    value (headroom for the sums after it), and the share still below the smallest normal."""
    if magnitudes.size == 0:
        return None, 0.0
    peak = float(np.max(magnitudes))
    exponent = math.floor(math.log2(largest / (2.0 * peak))) if peak > 0 else 0
    exponent = max(min(exponent, 24), -24)
    scale = 2.0**exponent
    return scale, float(np.mean(magnitudes * scale < smallest))
