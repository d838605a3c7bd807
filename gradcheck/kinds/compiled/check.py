"""The compiled check: the VJP eagerly, under tf.function and under XLA must agree."""

from __future__ import annotations

import contextlib
import re
from dataclasses import replace
from typing import Any

import numpy as np

from gradcheck.checks.context import CheckContext, Findings
from gradcheck.checks.weights import variable_in_call_cause
from gradcheck.engine.program import NotTraceable, first_line
from gradcheck.evidence.causes import Compiled, NotCompiled
from gradcheck.evidence.notes import CompiledInOwnDtype
from gradcheck.forensics.culprits import failing_node_site
from gradcheck.forensics.diverging_ops import OpDiverged
from gradcheck.forensics.graph import graph_cuts
from gradcheck.forensics.where_flips import WhereFlipped, xla_difference
from gradcheck.kinds.compiled.evidence import (
    CompiledDiffers,
    CompiledMatches,
    CompiledNotFinite,
    EagerNotFinite,
    NoEagerVJP,
    NoGradientEither,
    NoneOnly,
    Untraceable,
    ValuesDiffer,
    XlaUnsupported,
)
from gradcheck.kinds.compiled.judging import judge_compiled, output_differs
from gradcheck.kinds.compiled.tf import RAISING_GRADIENT, CompiledVJP, compiled_vjp, eager_vjp
from gradcheck.kinds.jacobian.verdicts import comparison_fields
from gradcheck.load.locations import exception_location
from gradcheck.numerics.tolerances import tolerance_for
from gradcheck.report import Cause, CheckResult, Kind, Mistake, Status

MODES = (("tf.function", False), ("tf.function(jit_compile=True)", True))


def _trace_failure(ctx: CheckContext, mode: str, exc: BaseException, jit: bool
                   ) -> tuple[Status, XlaUnsupported | Untraceable, Cause]:
    """Why the compiled VJP could not run: XLA lacking an op or a feature (skip: tf.function
    traced f already), or f not traceable at all (warn): a Keras layer creating variables in
    call, which gradcheck never traces, or what tracing raised."""
    if isinstance(exc, NotTraceable) and (
            created_in_call := variable_in_call_cause(ctx.recording)) is not None:
        return Status.WARN, Untraceable(mode, str(exc)), created_in_call
    text, error = str(exc), first_line(exc)
    if jit and not ("unsupported operations" in text or "failed to lift" in text.lower()):
        return (Status.SKIP, XlaUnsupported(error=error),
                Cause(Mistake.XLA_UNSUPPORTED, facts=NotCompiled(error)))
    if "unsupported operations" in text or "failed to lift variable" in text.lower():
        named = re.search(r"_JIT: ([\w, ]+?) \(", text)
        ops = named.group(1) if named else "variables created inside f"
        return (Status.SKIP, XlaUnsupported(ops=ops),
                Cause(Mistake.XLA_UNSUPPORTED, facts=NotCompiled(ops=ops)))
    return (Status.WARN, Untraceable(mode, error),
            Cause(Mistake.UNTRACEABLE,
                  facts=NotCompiled(error, gradient=getattr(exc, RAISING_GRADIENT, None))))



def _not_compiled(ctx: CheckContext, mode: str, exc: BaseException, jit: bool) -> CheckResult:
    """A compiled VJP that could not run, at the line of f that made it so."""
    status, evidence, cause = _trace_failure(ctx, mode, exc, jit)
    if isinstance(evidence, Untraceable):
        raising = getattr(exc, RAISING_GRADIENT, None)
        location = exception_location(exc) or (raising.location if raising else None)
    else:
        # An XLA error is raised by the runtime, under gradcheck's frames only: its line is
        # that of the op the error names.
        location = None
        site = failing_node_site(ctx.program, ctx.diff_outputs, str(exc))
        if site is not None and site.location is not None:
            location = site.location
            name = site.scope.split("/")[0] if site.scope else site.op
            evidence = replace(evidence, op=name, backward=site.backward, location=location)
            cause = replace(cause, culprit=name, location=location)
    return CheckResult(Kind.COMPILED, status, evidence=evidence, location=location, cause=cause)


def _own_dtype(ctx: CheckContext) -> str | None:
    """The arguments' own dtype when gradcheck promoted them to float64 (one dtype only)."""
    sources = [slot for slot in ctx.program.sources if slot.argument]
    own = {slot.own_dtype for slot in sources}
    if any(slot.dtype != "float64" for slot in sources) or len(own) != 1 or None in own:
        return None
    dtype = own.pop()
    return dtype if dtype in ("float32", "float16", "bfloat16") else None


def check_compiled(ctx: CheckContext) -> Findings:
    """Eager, tf.function and XLA VJPs; when promotion to float64 is what makes them differ
    (a float literal meeting a float64 input, an XLA kernel wrong in float64 only), the check
    in the arguments' own dtype is the verdict, with a note."""
    found = _compiled_findings(ctx, None)
    own = _own_dtype(ctx)
    if own is None or not any(r.status in (Status.FAIL, Status.WARN) for r in found.results):
        return found
    try:
        eager = eager_vjp(ctx.program, ctx.diff_outputs, ctx.upstreams)
    except Exception:  # f does not run in its own dtype eagerly: keep the promoted verdict
        return found
    in_own = _compiled_findings(replace(ctx, tolerance=tolerance_for(
        own, ctx.options.atol, ctx.options.rtol), tolerance_dtype=own), eager)
    if _said(in_own) == _said(found):  # nothing promotion made: the verdict stands as it is
        return found
    first = next(r for r in found.results if r.status in (Status.FAIL, Status.WARN))
    in_own.notes.append(CompiledInOwnDtype(own, first))
    return in_own


def _said(found: Findings) -> list[tuple[Status, str]]:
    return [(r.status, r.headline) for r in found.results]


def _compiled_findings(ctx: CheckContext, own: CompiledVJP | None) -> Findings:
    """The compiled check against the recorded eager VJP, or against `own` (the eager VJP
    in the arguments' own dtype, the compiled ones then in that dtype too)."""
    found = Findings()
    sources = [slot for slot in ctx.program.slots if slot.differentiable]
    eager = [ctx.recording.gradient(ctx.diff_outputs, slot, ctx.upstreams) for slot in sources]
    if any(g.error is not None or (g.value is not None and g.shape != s.shape)
           for g, s in zip(eager, sources)):
        found.add(Kind.COMPILED, Status.SKIP, evidence=NoEagerVJP())
        return found
    eager_values = [g.value for g in eager] if own is None else own.gradients
    dtypes = [ctx.outputs[k].dtype for k in ctx.diff_outputs] if own is None else own.dtypes
    for mode, jit in MODES:
        try:
            result = compiled_vjp(ctx.program, ctx.diff_outputs, ctx.upstreams, jit,
                                  own_dtype=own is not None, output_dtypes=dtypes)
        except Exception as exc:  # tracing or compiling failed: judged, not a crash
            found.results.append(_not_compiled(ctx, mode, exc, jit))
            if found.results[-1].status == Status.WARN:
                return found  # XLA would fail the same way
            continue
        changed = _values_differ(ctx, result.outputs, None if own is None else own.outputs)
        if changed is not None:
            found.results.append(_values_changed(ctx, mode, changed, jit, own is not None))
            continue
        for slot, value, compiled in zip(sources, eager_values, result.gradients):
            found.results.append(_judge(ctx, mode, slot.name, value, compiled, jit))
    return found


def _values_changed(ctx: CheckContext, mode: str, output: str, jit: bool, own: bool
                    ) -> CheckResult:
    """f's values differ when compiled: under XLA, at the tf.where whose condition XLA decides
    otherwise (a tie broken the other way by a differently rounded reduction), if one does,
    else at the first op XLA computes otherwise."""
    found = xla_difference(ctx.program, ctx.diff_outputs, own, ctx.tolerance.atol) if jit else None
    flip = found if isinstance(found, WhereFlipped) else None
    diverged = found if isinstance(found, OpDiverged) else None
    location = found.location if found is not None else None
    return CheckResult(Kind.COMPILED, Status.SKIP,
                       evidence=ValuesDiffer(mode, output, flip, diverged), location=location,
                       cause=Cause(Mistake.COMPILED_VALUES, location=location,
                                   facts=Compiled(mode)))


def _values_differ(ctx: CheckContext, outputs: list[np.ndarray],
                   eager_outputs: list[np.ndarray] | None) -> str | None:
    """The output f computes differently when compiled, beyond the dtype's tolerance."""
    for position, (k, compiled) in enumerate(zip(ctx.diff_outputs, outputs)):
        eager = np.asarray(ctx.outputs[k].tensor if eager_outputs is None
                           else eager_outputs[position], dtype=np.float64)
        if output_differs(compiled, eager, ctx.tolerance):
            return ctx.outputs[k].name
    return None


def _non_finite(mode: str, name: str, eager: np.ndarray, compiled: np.ndarray, jit: bool
                ) -> CheckResult | None:
    """A NaN or infinity in the eager VJP is the non-finite check's (skip); one only in the
    compiled VJP fails, marked for the non-finite diagnosis to analyse that variant."""
    if not np.all(np.isfinite(eager)):
        return CheckResult(Kind.COMPILED, Status.SKIP, evidence=EagerNotFinite(mode, name),
                           input=name)
    bad = ~np.isfinite(compiled)
    if not bad.any():
        return None
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return CheckResult(
        Kind.COMPILED, Status.FAIL, evidence=CompiledNotFinite(
            mode, name, int(bad.sum()), int(bad.size), index, float(compiled[index]),
            float(eager[index]), jit=jit),
        input=name, worst_index=index,
        cause=Cause(Mistake.COMPILED_NON_FINITE, facts=Compiled(mode)))


def _none_only(ctx: CheckContext, mode: str, name: str, eagerly: bool) -> CheckResult:
    """The gradient for `name` is None on one side only: under `mode`, at the op of the traced
    graph that cuts its path (a loop over a tf.data.Dataset becomes a dataset reduce there)."""
    cut = None
    if not eagerly:
        index = next(i for i, slot in enumerate(ctx.program.slots) if slot.name == name)
        with contextlib.suppress(Exception):  # where is a detail; the verdict stands without
            cut = next(iter(graph_cuts(ctx.program, index, none=True)[0]), None)
    op = cut.detail or None if cut is not None else None
    location = cut.location if cut is not None else None
    return CheckResult(
        Kind.COMPILED, Status.FAIL, input=name, location=location,
        evidence=NoneOnly(mode, name, eagerly=eagerly, cut=op,
                          dataset=op is not None and op.endswith("Dataset"), location=location),
        cause=Cause(Mistake.COMPILED_NONE, op, location, facts=Compiled(mode, eagerly=eagerly)))


def _judge(ctx: CheckContext, mode: str, name: str, eager: np.ndarray | None,
           compiled: np.ndarray | None, jit: bool = False) -> CheckResult:
    where: dict[str, Any] = {"input": name}
    if eager is None or compiled is None:
        if eager is None and compiled is None:
            return CheckResult(Kind.COMPILED, Status.PASS,
                               evidence=NoGradientEither(mode, name), **where)
        return _none_only(ctx, mode, name, eagerly=eager is None)
    if (non_finite := _non_finite(mode, name, eager, compiled, jit)) is not None:
        return non_finite
    comparison = judge_compiled(compiled, eager, ctx.tolerance, ctx.tolerance_dtype)
    if comparison.ok:
        return CheckResult(Kind.COMPILED, Status.PASS,
                           evidence=CompiledMatches(mode, comparison.max_abs_err),
                           **comparison_fields(comparison), **where)
    index = comparison.worst_index or ()
    return CheckResult(
        Kind.COMPILED, Status.FAIL, evidence=CompiledDiffers(
            mode, name, comparison.n_bad, comparison.size, index,
            float(np.asarray(compiled)[index]), float(np.asarray(eager)[index]),
            comparison.excess, jit=jit),
        **comparison_fields(comparison), **where,
        cause=Cause(Mistake.COMPILED_MISMATCH, facts=Compiled(mode)))
