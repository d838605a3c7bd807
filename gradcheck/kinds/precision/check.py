"""The precision check: where f computes in float16 or bfloat16, its gradient against the same
computation in float32, per source."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gradcheck.checks.context import CheckContext
from gradcheck.kinds.precision.evidence import FloatHead, NoFloat32Copy, PrecisionLoss, ValueLost
from gradcheck.kinds.precision.judging import faithful_copy, head_explains, judge_precision
from gradcheck.kinds.precision.tf import (
    PrecisionGradients,
    head_in_float32,
    low_precision,
    optimizer_loss_scale,
    precision_gradients,
)
from gradcheck.report import CheckResult, Kind, Status


def check_precision(ctx: CheckContext) -> list[CheckResult]:
    """One finding per source that gets a gradient, when f computes in low precision."""
    program = ctx.program
    dtype = low_precision(program, [ctx.outputs[k].tensor for k in ctx.diff_outputs])
    if dtype is None:
        return []
    scale = ctx.options.loss_scale
    if scale == "auto":
        scale = optimizer_loss_scale(program)
    scale = float(scale) if isinstance(scale, (int, float)) else 1.0
    compared = precision_gradients(program, ctx.diff_outputs, ctx.upstreams, dtype, scale)
    if compared is None:
        return [CheckResult(Kind.PRECISION, Status.SKIP, evidence=NoFloat32Copy(dtype))]
    largest = max((float(np.linalg.norm(r[np.isfinite(r)])) for r in compared.reference
                   if r is not None), default=0.0)
    if not faithful_copy(dtype, *compared.values):
        return [CheckResult(Kind.PRECISION, Status.FAIL, evidence=ValueLost(
            dtype, *compared.values, head=_float_head(ctx, compared, scale, largest)))]
    found = []
    for name, low, reference in zip(compared.names, compared.low, compared.reference):
        if low is None or reference is None:
            continue
        verdict = judge_precision(dtype, low, reference, scale, largest)
        found.append(CheckResult(
            Kind.PRECISION, Status.FAIL if not verdict.ok else Status.WARN if verdict.marginal
            else Status.PASS, input=name,
            max_rel_err=verdict.error, excess=verdict.error / verdict.allowed,
            evidence=PrecisionLoss(dtype, verdict.underflow, verdict.subnormal,
                                   verdict.overflow, verdict.error, verdict.allowed,
                                   verdict.loss_scale, verdict.scaled_underflow,
                                   verdict.bfloat16_serves, scale)))
    if any(r.failed for r in found):
        head = _float_head(ctx, compared, scale, largest)
        found = [replace(r, evidence=replace(r.evidence, head=head))
                 if r.failed and isinstance(r.evidence, PrecisionLoss) else r for r in found]
    return found


def _float_head(ctx: CheckContext, compared: PrecisionGradients, scale: float,
                largest: float) -> FloatHead | None:
    """The output layer whose switch alone to float32 gives float32's value and gradients
    (the Keras mixed-precision guide's float32 head), if there is one."""
    for run in head_in_float32(ctx.program, ctx.diff_outputs, ctx.upstreams, scale):
        if not faithful_copy(compared.dtype, run.value, compared.values[1]):
            continue
        if all(low is None or reference is None
               or head_explains(compared.dtype, low, reference, scale, largest)
               for low, reference in zip(run.gradients, compared.reference)):
            return FloatHead(run.layer, run.kind, run.model, run.policy)
    return None
