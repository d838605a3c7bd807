"""The vjp check: tape.gradient(ys, x, output_gradients=us) against Σₖ uₖᵀJₖ from finite
differences."""

from __future__ import annotations

from typing import Any

import numpy as np

from gradcheck.checks.context import CheckContext, Findings, shown
from gradcheck.engine.recording import GradientOutcome
from gradcheck.kinds.jacobian.check import JudgedInput
from gradcheck.kinds.jacobian.verdicts import (
    comparison_fields,
    disagreement,
    mismatch,
    symmetric_warning,
)
from gradcheck.kinds.vjp.evidence import VjpMatch, VjpMismatch, VjpSkipped, VjpSymmetric
from gradcheck.numerics import judging
from gradcheck.numerics.tolerances import ERROR_ESTIMATE_SAFETY
from gradcheck.report import Kind, Status


def fd_vjp(ctx: CheckContext, judged: JudgedInput) -> tuple[np.ndarray, np.ndarray]:
    """Σₖ uₖᵀJₖ from finite differences, and its error estimate."""
    analysis, shape = judged.analysis, judged.slot.shape
    expected = sum((judging.contract(u, judged.reference(k))
                    for u, k in zip(ctx.upstreams, ctx.diff_outputs)), start=np.zeros(shape))
    estimate = sum((judging.contract(np.abs(u), analysis.fd[k].error_estimate)
                    for u, k in zip(ctx.upstreams, ctx.diff_outputs)), start=np.zeros(shape))
    if ctx.fd_tolerance.scale_rtol:  # autodiff's own rounding grows with Σ|u||J|
        magnitude = sum((judging.contract(np.abs(u), np.abs(judged.reference(k)))
                         for u, k in zip(ctx.upstreams, ctx.diff_outputs)), start=np.zeros(shape))
        estimate = estimate + ctx.fd_tolerance.scale_rtol / ERROR_ESTIMATE_SAFETY * magnitude
    if ctx.tolerance_dtype in HALF_PRECISIONS:
        # Half-precision rounding of each Jacobian entry (what its atol and rtol allow) adds up
        # in Σ uᵢJᵢ: a VJP is allowed what the Jacobian entries it sums are allowed.
        tolerance = ctx.fd_tolerance
        allowed = sum((judging.contract(np.abs(u), tolerance.atol + tolerance.rtol
                                        * np.abs(judged.reference(k)))
                       for u, k in zip(ctx.upstreams, ctx.diff_outputs)), start=np.zeros(shape))
        estimate = estimate + allowed / ERROR_ESTIMATE_SAFETY
    return expected, estimate


HALF_PRECISIONS = frozenset({"float16", "bfloat16"})


def check_vjp(ctx: CheckContext, judged: JudgedInput) -> tuple[GradientOutcome, Findings]:
    """The VJP tape.gradient gives (reused by the explanation) and its verdict."""
    found = Findings()
    analysis, slot = judged.analysis, judged.slot
    outcome = ctx.recording.gradient(ctx.diff_outputs, slot, ctx.upstreams)
    where: dict[str, Any] = {"input": slot.name, "output": None if len(ctx.diff_outputs) > 1
             else ctx.outputs[ctx.diff_outputs[0]].name}
    if not ctx.wants(Kind.VJP):
        return outcome, found
    if outcome.error is not None or not judged.shape_ok:
        found.add(Kind.VJP, Status.SKIP, evidence=VjpSkipped(), **where)
        return outcome, found
    actual = np.zeros(slot.shape) if outcome.value is None else outcome.value
    expected, estimate = fd_vjp(ctx, judged)
    tolerance = ctx.fd_tolerance
    comparison = judging.compare(actual, expected, tolerance, estimate)
    if not comparison.ok and not analysis.refined.all():
        # Same argument as judging.in_doubt: only failing elements can change the verdict.
        failing = ~(np.abs(actual - expected) <= tolerance.atol + tolerance.rtol
                    * np.abs(expected) + ERROR_ESTIMATE_SAFETY * estimate)
        analysis.refine(ctx, np.flatnonzero(failing))
        expected, estimate = fd_vjp(ctx, judged)
        comparison = judging.compare(actual, expected, tolerance, estimate)
    matrices = (shown(actual), shown(expected))
    if comparison.ok:
        found.add(Kind.VJP, Status.PASS, evidence=VjpMatch(*matrices),
                  **comparison_fields(comparison), **where)
        return outcome, found
    probe = analysis.probe
    verdict = probe.judge_vjp(actual, list(ctx.upstreams), tolerance) if probe else None
    warning = symmetric_warning(
        Kind.VJP, lambda numbers, size: VjpSymmetric(*matrices, numbers, size), comparison,
        verdict, where)
    found.results.append(warning or mismatch(
        Kind.VJP, VjpMismatch(*matrices, disagreement(actual, expected, comparison, verdict)),
        comparison, where))
    return outcome, found
