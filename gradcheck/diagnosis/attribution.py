"""Pointing f's own failing checks at what explains them: a custom gradient found wrong on
its own, or one declared a deliberate surrogate (read from the findings' causes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gradcheck.diagnosis.graph_breaks import CUT_SYMPTOMS
from gradcheck.report import CheckResult, Kind, Status

# f's checks that a wrong (or surrogate) custom gradient explains.
EXPLAINED = CUT_SYMPTOMS | {Kind.JVP, Kind.FAST, Kind.SECOND_ORDER, Kind.HESSIAN}


def as_surrogate(result: CheckResult, name: str) -> CheckResult:
    if not result.failed:
        return result
    return replace(result, status=Status.WARN,
                   message=f"{result.message}; declared a deliberate surrogate gradient"
                           f" (--surrogate {name}), so not a failure")


def _culprit(result: CheckResult) -> str:
    return result.cause.culprit if result.cause and result.cause.culprit else "a custom gradient"


def excuse(core: Sequence[CheckResult], surrogates: Sequence[CheckResult]) -> list[CheckResult]:
    """f's mismatches are expected when only declared surrogate gradients differ."""
    first = surrogates[0]
    return [
        replace(c, status=Status.WARN, location=c.location or first.location, cause=first.cause,
                message=f"{c.message}; expected: {_culprit(first)} is a declared surrogate")
        if c.failed and c.check in EXPLAINED else c
        for c in core
    ]


def blame(core: Sequence[CheckResult], wrong_sites: Sequence[CheckResult]) -> list[CheckResult]:
    """Point f's own failing checks at the custom_gradient found wrong on its own."""
    first = wrong_sites[0]
    where = f" (grad_fn at {first.location})" if first.location else ""
    return [
        replace(c, location=c.location or first.location, cause=first.cause,
                message=f"{c.message}; likely cause: {_culprit(first)}{where}")
        if c.failed and c.check in EXPLAINED else c
        for c in core
    ]
