"""Sentences of the non-finite check."""

from __future__ import annotations

from gradcheck.evidence.non_finite import (
    NonFiniteSeen,
    NonFiniteUntraceable,
    NoVerdictAtNonFinite,
)
from gradcheck.render.causes import fix, stated_cause, what
from gradcheck.render.sentences.dispatch import clause, first_clause, sentence
from gradcheck.report import CheckResult


def _seen(evidence: NonFiniteSeen, result: CheckResult) -> str:
    which = (f"the gradient for {evidence.name}" if evidence.gradient
             else evidence.name if evidence.name.startswith("the ")  # "the loss" of a step
             else f"f's output {evidence.name}")
    if evidence.order == 2:
        which = (f"the second derivative for {evidence.name} (the gradient, which is finite,"
                 " differentiated by nested tapes)")
    index = f" (first at {list(evidence.index)})" if evidence.index else ""
    lead = (f"under {evidence.variant} only (eagerly it is finite), "
            if evidence.variant != "eager" else "")
    return (f"{lead}{which} is {evidence.produced} in {evidence.count} of {evidence.size}"
            f" element(s){index}")


@sentence.register
def _non_finite(evidence: NonFiniteSeen, result: CheckResult) -> str:
    cause = stated_cause(result)
    if not evidence.origins:
        return f"{_seen(evidence, result)}; {what(cause)}"
    return f"{_seen(evidence, result)}: {what(cause)}; fix: {fix(cause)}"


@clause.register
def _non_finite_clause(evidence: NonFiniteSeen, result: CheckResult) -> str:
    return first_clause(_non_finite(evidence, result))


@sentence.register
def _untraceable(evidence: NonFiniteUntraceable, result: CheckResult) -> str:
    return ("f or its gradient is NaN or infinite at this point, and f cannot be traced into a"
            " graph (tf.function) to find the op that makes it so")


@sentence.register
def _no_verdict(evidence: NoVerdictAtNonFinite, result: CheckResult) -> str:
    return (f"no {evidence.check} verdict: f's output {evidence.output} is {evidence.produced}"
            " at this point, so the values compared are too (see the non-finite check)")
