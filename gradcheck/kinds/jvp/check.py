"""The jvp check: forward-mode JVPs against reverse-mode VJPs through ⟨u, Jv⟩ = ⟨Jᵀu, v⟩."""

from __future__ import annotations

from typing import Any

import numpy as np

from gradcheck.checks.context import CheckContext, Findings
from gradcheck.engine.program import Slot, first_line
from gradcheck.evidence.causes import NoForwardRule
from gradcheck.forensics.cut_ops import CutSite
from gradcheck.forensics.gaps import (
    forward_mode_gaps,
    forward_non_finite_site,
    forward_op_location,
    missing_gradient_of,
)
from gradcheck.kinds.jvp.evidence import (
    ComparedForwardGap,
    ForwardGap,
    ForwardNotFinite,
    ForwardRaised,
    ModesAgree,
    ModesDisagree,
    ModesIndependent,
    NestedModesDisagree,
    NoForwardMode,
    NoReverseVJP,
    ReverseNotFinite,
)
from gradcheck.load.locations import exception_location
from gradcheck.numerics.tolerances import machine_eps
from gradcheck.report import Cause, Kind, Mistake, Status

# Both sides are autodiff, with no finite differences: they may differ by rounding only,
# allowed as this many machine epsilons of the sum of the terms' magnitudes.
JVP_ROUNDING = 300.0
# A random stream of its own for v, and for u when the VJP's upstream is the user's (ones
# would leave the projection blind to all but the sum of J's rows); a random upstream is
# reused, and with it the VJP already taken.
JVP_STREAM = 2


def check_jvp(ctx: CheckContext) -> Findings:
    """One random tangent v per input: Σₖ⟨uₖ, Jₖv⟩ (forward mode) against ⟨Σₖ Jₖᵀuₖ, v⟩."""
    rng = np.random.default_rng((ctx.options.seed, JVP_STREAM))
    found = Findings()
    for slot in ctx.program.sources:
        found.extend(_check_one(ctx, slot, rng))
    return found


def _allowed(ctx: CheckContext, scale: float, tangent: np.ndarray,
             upstreams: list[np.ndarray]) -> float:
    # Tolerances the user gave explicitly also bound how far the two modes may differ.
    given = ctx.options
    accepted = (given.rtol or 0.0) * scale + (given.atol or 0.0) * float(
        np.sum(np.abs(tangent)) * sum(np.sum(np.abs(u)) for u in upstreams))
    # Where J is zero (a softmax's invariance, say), both sides are rounding noise of the
    # intermediate values: as much as the Jacobian check's atol per element allows.
    noise = ctx.tolerance.atol * float(np.sqrt(np.sum(tangent ** 2))) * float(
        np.sqrt(sum(np.sum(u ** 2) for u in upstreams)))
    return float(JVP_ROUNDING * machine_eps(ctx.tolerance_dtype) * scale + accepted + noise
                 + np.finfo(np.float64).tiny)


def _check_one(ctx: CheckContext, slot: Slot, rng: np.random.Generator) -> Findings:
    found = Findings()
    outputs = ctx.diff_outputs
    upstreams = (list(ctx.upstreams) if ctx.random_upstreams else
                 [rng.standard_normal(ctx.outputs[k].shape) for k in outputs])
    tangent = rng.standard_normal(slot.shape)
    where: dict[str, Any] = {
        "input": slot.name, "output": ctx.outputs[outputs[0]].name if len(outputs) == 1 else None}
    reverse = ctx.recording.gradient(outputs, slot, upstreams)
    if reverse.error is not None or (reverse.value is not None and reverse.shape != slot.shape):
        found.add(Kind.JVP, Status.SKIP, evidence=NoReverseVJP(slot.name), **where)
        return found
    try:
        jvps = ctx.recording.forward_jvp(slot, tangent, outputs)
    except Exception as exc:  # forward mode is not defined for every op
        gap = _raised_gap(ctx, slot, first_line(exc))
        if gap is not None:
            _gap_skip(found, slot.name, gap, where)
        else:
            found.add(Kind.JVP, Status.SKIP, evidence=ForwardRaised(slot.name, first_line(exc)),
                      location=exception_location(exc), **where)
        return found
    if all(j is None for j in jvps) and reverse.value is not None and np.any(reverse.value):
        if gaps := _gaps(ctx, slot):  # the op without a forward-mode rule, at its line
            _gap_skip(found, slot.name, _gap_cause(gaps), where)
        else:
            found.add(Kind.JVP, Status.SKIP, evidence=NoForwardMode(slot.name), **where)
        return found
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: judged non-finite below
        forward_terms = [u * j for u, j in zip(upstreams, jvps) if j is not None]
        reverse_terms = (np.zeros(slot.shape) if reverse.value is None
                         else reverse.value * tangent)
        forward = float(sum(np.sum(t) for t in forward_terms))
        backward = float(np.sum(reverse_terms))
    if not np.isfinite(backward):
        found.add(Kind.JVP, Status.SKIP,
                  evidence=ReverseNotFinite(slot.name, forward, backward), **where)
        return found
    if not np.isfinite(forward):
        index = next(i for i, s in enumerate(ctx.program.slots) if s is slot)
        site = forward_non_finite_site(ctx.program, index, tangent)
        found.add(Kind.JVP, Status.WARN, evidence=ForwardNotFinite(
            slot.name, forward, backward, site[0] if site else None),
                  location=site[1] if site else None, **where)
        return found
    scale = max(float(sum(np.sum(np.abs(t)) for t in forward_terms)),
                float(np.sum(np.abs(reverse_terms))))
    allowed = _allowed(ctx, scale, tangent, upstreams)
    independent = all(j is None for j in jvps) and reverse.value is None
    return _judged(ctx, slot, found, where, (forward, backward, allowed), scale, independent)


def _judged(ctx: CheckContext, slot: Slot, found: Findings, where: dict[str, Any],
            compared: tuple[float, float, float], scale: float, independent: bool
            ) -> Findings:
    """The verdict on ⟨u, Jv⟩ (forward) against ⟨Jᵀu, v⟩ (reverse), both finite, and the
    difference allowed; `independent`: neither mode sees a path from the input."""
    forward, backward, allowed = compared
    error = abs(forward - backward)
    numbers: dict[str, Any] = {
        "max_abs_err": error, "max_rel_err": error / scale if scale else 0.0,
        "excess": error / allowed}
    if independent:
        found.add(Kind.JVP, Status.PASS, evidence=ModesIndependent(*compared, slot.name),
                  **where)
    elif error <= allowed:
        found.add(Kind.JVP, Status.PASS, evidence=ModesAgree(*compared, slot.name), **numbers,
                  **where)
    elif gaps := _gaps(ctx, slot):
        _gap_skip(found, slot.name, _gap_cause(gaps), where, compared)
    elif ctx.recording.nested_forward:
        found.add(Kind.JVP, Status.WARN, evidence=NestedModesDisagree(*compared, slot.name),
                  **numbers, **where)
    else:
        found.add(Kind.JVP, Status.FAIL, evidence=ModesDisagree(*compared, slot.name),
                  **numbers, **where)
    return found


def _gap_skip(found: Findings, name: str, cause: Cause, where: dict[str, Any],
              compared: tuple[float, float, float] | None = None) -> None:
    evidence = ForwardGap(name) if compared is None else ComparedForwardGap(name, *compared)
    found.add(Kind.JVP, Status.SKIP, evidence=evidence, location=cause.location, cause=cause,
              **where)


def _gaps(ctx: CheckContext, slot: Slot) -> list[CutSite]:
    index = next(i for i, s in enumerate(ctx.program.slots) if s is slot)
    return forward_mode_gaps(ctx.program, index)


def _raised_gap(ctx: CheckContext, slot: Slot, error: str) -> Cause | None:
    """Forward mode raised because TensorFlow has no gradient for an op's gradient (forward
    mode is built from it): the user's op, at its line."""
    missing = missing_gradient_of(error)
    if missing is None or slot.is_variable:
        return None
    index = next(i for i, s in enumerate(ctx.program.slots) if s is slot)
    found = forward_op_location(ctx.program, index, missing)
    if found is None:
        return None
    op, location = found
    return _gap_cause([CutSite("no-forward-rule", location, op)], missing)


def _gap_cause(gaps: list[CutSite], missing: str | None = None) -> Cause:
    ops = tuple(dict.fromkeys(gap.detail for gap in gaps))
    return Cause(Mistake.NO_FORWARD_RULE, gaps[0].detail, gaps[0].location,
                 NoForwardRule(ops, missing))
