"""Gather what tape.gradient returns per input, with and without output_gradients, for the
explanation of the output_gradients contract: checks/explain.py turns it into the
Explanation's data, and gradcheck.render.sentences.explain words that."""

from __future__ import annotations

from collections.abc import Sequence

from gradcheck.checks import explain
from gradcheck.checks.context import CheckContext
from gradcheck.checks.full import SourceAnalysis
from gradcheck.evidence.explain import Explanation
from gradcheck.evidence.vjp import VjpSymmetric
from gradcheck.report import CheckResult, Kind, Status
from gradcheck.tf.recording import GradientOutcome


def _error(*outcomes: GradientOutcome) -> str | None:
    return next((o.error_line for o in outcomes if o.error is not None), None)


def _target_facts(ctx: CheckContext, analysis: SourceAnalysis) -> tuple[explain.TargetFacts, ...]:
    slot, facts = analysis.slot, []
    for u, k in zip(ctx.upstreams, ctx.diff_outputs):
        plain = ctx.recording.plain_gradient([k], slot)
        vjp = ctx.recording.gradient([k], slot, [u])
        block = analysis.autodiff.get(k)
        source = "autodiff" if block is not None else (
            "none" if plain.value is None and plain.error is None else "finite differences")
        if source == "finite differences":
            block = analysis.reference(k)
        facts.append(explain.TargetFacts(
            ctx.outputs[k].name, ctx.outputs[k].shape, u, block, source, plain.value,
            vjp.value, analysis.reference(k), _error(plain, vjp),
            slot.complex_dtype is not None and ctx.outputs[k].complex_dtype is not None))
    return tuple(facts)


def explanation(ctx: CheckContext, analyses: Sequence[tuple[SourceAnalysis, GradientOutcome]],
                results: Sequence[CheckResult]) -> Explanation:
    """What tape.gradient returns for each input, with and without output_gradients."""
    facts = []
    for analysis, vjp in analyses:
        slot = analysis.slot
        plain = ctx.recording.plain_gradient(ctx.diff_outputs, slot)
        symmetric_vjp = any(r.check == Kind.VJP and r.status == Status.WARN
                            and r.input == slot.name and isinstance(r.evidence, VjpSymmetric)
                            for r in results)
        facts.append(explain.InputFacts(
            slot.name, slot.shape, _target_facts(ctx, analysis), plain.value, vjp.value,
            _error(plain, vjp), symmetric_vjp))
    return explain.explain(facts)
