"""The compiled check: the VJP eagerly, under tf.function, and under XLA must agree."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from gradcheck.checks.context import CheckContext, Findings
from gradcheck.checks.verdicts import comparison_fields
from gradcheck.load.locations import exception_location
from gradcheck.numerics import judging
from gradcheck.numerics.tolerances import Tolerance, machine_eps
from gradcheck.report import Cause, CheckResult, Kind, Status, format_index
from gradcheck.tf.compiled import compiled_vjp
from gradcheck.tf.program import first_line

MODES = (("tf.function", False), ("tf.function(jit_compile=True)", True))
# Compiled kernels reassociate sums: allow this many epsilons of the VJP's scale on top of
# the check's tolerance.
REASSOCIATION = 64.0


def _trace_failure(mode: str, exc: BaseException, jit: bool) -> tuple[Status, str, Cause]:
    """Why the compiled VJP could not run: XLA lacking an op or a feature (skip: tf.function
    traced f already), or f not traceable at all (warn)."""
    text = str(exc)
    if jit and not ("unsupported operations" in text or "failed to lift" in text.lower()):
        return (Status.SKIP, f"XLA cannot compile the VJP ({first_line(exc)})",
                Cause("xla-unsupported", first_line(exc)))
    if "unsupported operations" in text or "failed to lift variable" in text.lower():
        named = re.search(r"_JIT: ([\w, ]+?) \(", text)
        ops = named.group(1) if named else "variables created inside f"
        return (Status.SKIP, f"XLA cannot compile the VJP: no XLA kernel for {ops}",
                Cause("xla-unsupported", f"XLA has no kernel for {ops}"))
    fix = ("create variables once, outside f (or in a Keras layer's build); keep tensors in"
           " TensorFlow (no .numpy(), float() or Python `if` on tensor values)")
    return (Status.WARN, f"{mode} cannot trace f ({first_line(exc)}): the gradient works"
            f" eagerly only; {fix}", Cause("untraceable", first_line(exc), fix=fix))


def check_compiled(ctx: CheckContext) -> Findings:
    found = Findings()
    sources = [slot for slot in ctx.program.slots if slot.differentiable]
    eager = [ctx.recording.gradient(ctx.diff_outputs, slot, ctx.upstreams) for slot in sources]
    if any(g.error is not None or (g.value is not None and g.shape != s.shape)
           for g, s in zip(eager, sources)):
        found.add(Kind.COMPILED, Status.SKIP, "no eager VJP to compare with (see the checks"
                  " above)")
        return found
    for mode, jit in MODES:
        try:
            result = compiled_vjp(ctx.program, ctx.diff_outputs, ctx.upstreams, jit)
        except Exception as exc:  # tracing or compiling failed: judged, not a crash
            status, message, cause = _trace_failure(mode, exc, jit)
            found.add(Kind.COMPILED, status, message, location=exception_location(exc),
                      cause=cause)
            if status == Status.WARN:
                return found  # XLA would fail the same way
            continue
        changed = _values_differ(ctx, result.outputs)
        if changed is not None:
            found.add(Kind.COMPILED, Status.SKIP,
                      f"f itself returns other values under {mode} ({changed}: random ops, or"
                      " a kernel that computes differently), so its VJPs are not comparable",
                      cause=Cause("compiled-values", f"f's values differ under {mode}"))
            continue
        for slot, outcome, compiled in zip(sources, eager, result.gradients):
            found.results.append(_judge(ctx, mode, slot.name, outcome.value, compiled))
    return found


def _values_differ(ctx: CheckContext, outputs: list[np.ndarray]) -> str | None:
    """Which output f computes differently when compiled, beyond the dtype's tolerance."""
    for k, compiled in zip(ctx.diff_outputs, outputs):
        eager = np.asarray(ctx.outputs[k].tensor, dtype=np.float64)
        scale = float(np.max(np.abs(eager), initial=0.0))
        if compiled.shape != eager.shape or not np.all(
                np.abs(compiled - eager) <= ctx.tolerance.atol + ctx.tolerance.rtol * scale):
            return f"{ctx.outputs[k].name} differs"
    return None


def _judge(ctx: CheckContext, mode: str, name: str, eager: np.ndarray | None,
           compiled: np.ndarray | None) -> CheckResult:
    where: dict[str, Any] = {"input": name}
    if eager is None or compiled is None:
        if eager is None and compiled is None:
            return CheckResult(Kind.COMPILED, Status.PASS, f"{mode} and eager agree: no"
                               f" gradient for {name}", **where)
        which = "eagerly" if compiled is None else f"under {mode}"
        return CheckResult(Kind.COMPILED, Status.FAIL,
                           f"the gradient for {name} is None only {which}", **where,
                           cause=Cause("compiled-none", f"None {which}"))
    # Compiled kernels reassociate sums and may use other algorithms (XLA's eigensolver):
    # differences are judged against the block's scale, as finite differences would be.
    scale = float(np.max(np.abs(eager), initial=0.0))
    tolerance = Tolerance(ctx.tolerance.atol + (ctx.tolerance.rtol + REASSOCIATION * machine_eps(
        ctx.tolerance_dtype)) * scale, ctx.tolerance.rtol)
    comparison = judging.compare(compiled, eager, tolerance)
    if comparison.ok:
        return CheckResult(Kind.COMPILED, Status.PASS,
                           f"the VJP under {mode} matches the eager one (max abs err"
                           f" {comparison.max_abs_err:.1e})", **comparison_fields(comparison),
                           **where)
    index = comparison.worst_index or ()
    return CheckResult(
        Kind.COMPILED, Status.FAIL,
        f"the VJP for {name} under {mode} differs from the eager one in {comparison.n_bad} of"
        f" {comparison.size} elements; worst {format_index(index)}: {mode}"
        f" {np.asarray(compiled)[index]:.6g}, eager {np.asarray(eager)[index]:.6g}"
        f" ({comparison.excess:.3g}× the allowed error)", **comparison_fields(comparison),
        **where, cause=Cause("compiled-mismatch", f"{mode} differs from eager"))
