"""Pointing f's own failing checks at what explains them: a custom gradient found wrong on
its own, or one declared a deliberate surrogate (read from the findings' causes)."""

from __future__ import annotations

from collections.abc import Sequence

from gradcheck.diagnosis.explained import attribute
from gradcheck.diagnosis.graph_breaks import CUT_SYMPTOMS
from gradcheck.report import Attribution, CheckResult, Kind, Relation, Status

# f's checks that a wrong (or surrogate) custom gradient explains.
EXPLAINED = CUT_SYMPTOMS | {Kind.JVP, Kind.FAST, Kind.SECOND_ORDER, Kind.HESSIAN}


def as_surrogate(result: CheckResult, name: str) -> CheckResult:
    if not result.failed:
        return result
    return attribute(result, Attribution(Relation.DECLARED_SURROGATE, surrogate=name),
                     status=Status.WARN)


def excuse(core: Sequence[CheckResult], surrogates: Sequence[CheckResult]) -> list[CheckResult]:
    """f's mismatches are expected when only declared surrogate gradients differ."""
    first = surrogates[0]
    return [
        attribute(c, Attribution(Relation.EXPECTED_SURROGATE, first.cause), status=Status.WARN,
                  location=c.location or first.location, cause=first.cause)
        if c.failed and c.check in EXPLAINED else c
        for c in core
    ]


def in_gradient(findings: Sequence[CheckResult], ran: Sequence[CheckResult], seen: bool
                ) -> list[CheckResult]:
    """Of these custom gradients' findings, those of the ones whose grad_fn ran in f's
    gradient (`ran`): only they can explain it (one nested in another's forward, as
    perturb-then-apply nests straight-through rounding, never runs). All of them when no
    grad_fn was `seen` running at all."""
    return [r for r in findings if any(r is other for other in ran)] if seen else list(findings)


def blame(core: Sequence[CheckResult], wrong_sites: Sequence[CheckResult]) -> list[CheckResult]:
    """Point f's own failing checks at the custom_gradient found wrong on its own."""
    first = wrong_sites[0]
    return [
        attribute(c, Attribution(Relation.LIKELY_CAUSE, first.cause),
                  location=c.location or first.location, cause=first.cause)
        if c.failed and c.check in EXPLAINED else c
        for c in core
    ]
