"""Every sentence a finding says, made from its evidence (gradcheck.evidence) and attribution.

`sentence` is dispatched on the evidence's type; each family of findings registers its
sentences in a module of this package, imported below.
"""

from __future__ import annotations

import functools

from gradcheck.evidence import Evidence
from gradcheck.report import Attribution, CheckResult, Relation


@functools.singledispatch
def sentence(evidence: Evidence, result: CheckResult) -> str:
    """What `evidence` shows, as the clause a table row shows (no attribution)."""
    raise TypeError(f"no sentence is registered for {type(evidence).__name__}")


@functools.singledispatch
def continuation(evidence: Evidence, result: CheckResult) -> str:
    """What the whole message says after the headline (what follows from it, what can be
    missed), before any attribution; none by default."""
    return ""


_OPENING, _CLOSING = "([{", ")]}"


def _first_clause(message: str) -> str:
    """Up to the first "; " outside brackets: a hand-built message has no evidence to say
    where its headline ends."""
    depth = 0
    for index, character in enumerate(message):
        if character in _OPENING:
            depth += 1
        elif character in _CLOSING:
            depth = max(0, depth - 1)
        elif depth == 0 and message.startswith("; ", index):
            return message[:index]
    return message


def headline(result: CheckResult) -> str:
    """The finding in one clause: its sentence (a hand-built result: its first clause)."""
    if result.evidence is None:
        return _first_clause(result.message)
    return sentence(result.evidence, result)


def attribution(attributed: Attribution) -> str:
    """What explains a finding, as the clause that follows its headline."""
    cause = attributed.cause
    culprit = cause.culprit if cause is not None and cause.culprit else "a custom gradient"
    if attributed.relation == Relation.DECLARED_SURROGATE:
        return (f"declared a deliberate surrogate gradient (--surrogate {attributed.surrogate}),"
                " so not a failure")
    if attributed.relation == Relation.EXPECTED_SURROGATE:
        return f"expected: {culprit} is a declared surrogate"
    where = f" (grad_fn at {cause.location})" if cause is not None and cause.location else ""
    return f"likely cause: {culprit}{where}"


def message(result: CheckResult) -> str:
    """The whole message: the headline, its continuation, then what it is attributed to."""
    parts = [headline(result)]
    if result.evidence is not None:
        parts.append(continuation(result.evidence, result))
    if result.attributed_to is not None:
        parts.append(attribution(result.attributed_to))
    return "; ".join(part for part in parts if part)


from gradcheck.render.sentences import (  # noqa: E402  (each module registers its sentences)
    connected,  # noqa: F401
    fast,  # noqa: F401
)
