"""The jvp check: forward-mode JVPs against reverse-mode VJPs through ⟨u, Jv⟩ = ⟨Jᵀu, v⟩."""

from __future__ import annotations

from typing import Any

import numpy as np

from gradcheck.checks.context import CheckContext, Findings
from gradcheck.numerics.tolerances import machine_eps
from gradcheck.report import Cause, Kind, Status
from gradcheck.tf.gaps import forward_mode_gaps, forward_op_location, missing_gradient_of
from gradcheck.tf.graph import CutSite
from gradcheck.tf.program import Slot, first_line

# Both sides are autodiff, with no finite differences: they may differ by rounding only,
# allowed as this many machine epsilons of the sum of the terms' magnitudes.
JVP_ROUNDING = 300.0
# ForwardAccumulator gives None where TensorFlow has no way forward: not a wrong gradient.
_NO_FORWARD_MODE = (
    "forward mode (ForwardAccumulator) gives no JVP for {0} (None) although reverse mode gives"
    " a gradient: TensorFlow has no forward-mode rule on the path (a custom_gradient whose"
    " forward and grad_fn both leave TensorFlow, e.g. NumPy through tf.numpy_function, which"
    " forward mode would differentiate through; or an op without one), so the two modes cannot"
    " be compared")
# Random streams of their own: the JVP's u and v must not repeat the VJP's upstream.
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
    upstreams = [rng.standard_normal(ctx.outputs[k].shape) for k in outputs]
    tangent = rng.standard_normal(slot.shape)
    where = {"input": slot.name,
             "output": ctx.outputs[outputs[0]].name if len(outputs) == 1 else None}
    reverse = ctx.recording.gradient(outputs, slot, upstreams)
    if reverse.error is not None or (reverse.value is not None and reverse.shape != slot.shape):
        found.add(Kind.JVP, Status.SKIP,
                  f"no reverse-mode VJP for {slot.name} to compare with (see the checks above)",
                  **where)
        return found
    try:
        jvps = ctx.recording.forward_jvp(slot, tangent, outputs)
    except Exception as exc:  # forward mode is not defined for every op
        gap = _raised_gap(ctx, slot, first_line(exc))
        if gap is not None:
            _gap_skip(found, slot.name, gap, where)
        else:
            found.add(Kind.JVP, Status.SKIP,
                      f"forward mode could not run for {slot.name}: {first_line(exc)}", **where)
        return found
    if all(j is None for j in jvps) and reverse.value is not None and np.any(reverse.value):
        if gaps := _gaps(ctx, slot):  # the op without a forward-mode rule, at its line
            _gap_skip(found, slot.name, _gap_cause(gaps), where)
        else:
            found.add(Kind.JVP, Status.SKIP, _NO_FORWARD_MODE.format(slot.name), **where)
        return found
    forward_terms = [u * j for u, j in zip(upstreams, jvps) if j is not None]
    reverse_terms = np.zeros(slot.shape) if reverse.value is None else reverse.value * tangent
    forward = float(sum(np.sum(t) for t in forward_terms))
    backward = float(np.sum(reverse_terms))
    if not np.isfinite(backward):
        found.add(Kind.JVP, Status.SKIP, f"reverse mode gives {backward:.6g} for {slot.name}"
                  f" (forward mode {forward:.6g}): not finite, so not comparable (see the"
                  " non-finite check)", **where)
        return found
    if not np.isfinite(forward):
        found.add(Kind.JVP, Status.WARN, f"forward mode (ForwardAccumulator) gives ⟨u, Jv⟩ ="
                  f" {forward:.6g} for {slot.name} where reverse mode is finite ({backward:.6g}):"
                  " a forward-mode rule of an op on the path is not finite at this point (code"
                  " using ForwardAccumulator or tf.autodiff.jvp would see it)", **where)
        return found
    scale = max(float(sum(np.sum(np.abs(t)) for t in forward_terms)),
                float(np.sum(np.abs(reverse_terms))))
    allowed = _allowed(ctx, scale, tangent, upstreams)
    error = abs(forward - backward)
    details: dict[str, Any] = {"forward": forward, "reverse": backward, "allowed": allowed}
    numbers = {"max_abs_err": error, "max_rel_err": error / scale if scale else 0.0,
               "excess": error / allowed, "details": details}
    if all(j is None for j in jvps) and reverse.value is None:
        found.add(Kind.JVP, Status.PASS, f"forward and reverse mode agree that the outputs"
                  f" do not depend on {slot.name}", details=numbers["details"], **where)
    elif error <= allowed:
        found.add(Kind.JVP, Status.PASS,
                  f"forward mode ⟨u, Jv⟩ = {forward:.6g} matches reverse mode ⟨Jᵀu, v⟩ ="
                  f" {backward:.6g} for a random v and u", **numbers, **where)
    elif gaps := _gaps(ctx, slot):
        _gap_skip(found, slot.name, _gap_cause(gaps), where, details)
    else:
        found.add(Kind.JVP, Status.FAIL,
                  f"forward mode (ForwardAccumulator) gives ⟨u, Jv⟩ = {forward:.6g} but reverse"
                  f" mode (tape.gradient) gives ⟨Jᵀu, v⟩ = {backward:.6g} for {slot.name}: the"
                  " two modes disagree, so a gradient (often a custom_gradient grad_fn) is"
                  " inconsistent", **numbers, **where)
    return found


def _gap_skip(found: Findings, name: str, cause: Cause, where: dict[str, Any],
              details: dict[str, Any] | None = None) -> None:
    found.add(Kind.JVP, Status.SKIP, f"no forward-mode verdict for {name}: {cause.what};"
              f" {cause.fix}", location=cause.location, cause=cause, details=details or {},
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
    return _gap_cause([CutSite("no-forward-rule", location, op)],
                      f"TensorFlow has no gradient for {missing}, which its forward mode needs")


def _gap_cause(gaps: list[CutSite], why: str | None = None) -> Cause:
    ops = ", ".join(dict.fromkeys(gap.detail for gap in gaps))
    return Cause(
        "no-forward-rule",
        f"TensorFlow has no forward-mode rule for {ops} ("
        + (why or "tf.autodiff.ForwardAccumulator gives no tangent through it, so forward"
           " mode says 0 where reverse mode does not") + ")",
        culprit=gaps[0].detail, location=gaps[0].location,
        fix="a gap in TensorFlow, not in your gradient: reverse mode (what training uses) is"
            " checked by the other checks; for JVPs through it, use two reverse passes"
            " (the transpose of tape.gradient) instead of ForwardAccumulator")
