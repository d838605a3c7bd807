"""The dispatchers of sentences (a kind's evidence says itself; others by the evidence's type)
and the attribution clauses."""

from __future__ import annotations

import functools

from gradcheck.evidence import Evidence
from gradcheck.evidence.text import first_clause
from gradcheck.render.causes import fix, what
from gradcheck.report import Attribution, CheckResult, Relation


@functools.singledispatch
def sentence(evidence: Evidence, result: CheckResult) -> str:
    """What `evidence` shows, in full (no attribution): its own words (Evidence.words), or
    those registered here for a family not yet moved into gradcheck.kinds."""
    return evidence.words(result)


@functools.singledispatch
def clause(evidence: Evidence, result: CheckResult) -> str:
    """What `evidence` shows, as the one clause a table row shows (Evidence.clause)."""
    if type(evidence).words is Evidence.words:  # a family registered here: its sentence
        return sentence(evidence, result)
    return evidence.clause(result)


def headline(result: CheckResult) -> str:
    """The finding in one clause: its evidence's clause (a hand-built result: its first)."""
    if result.evidence is None:
        return first_clause(result.message)
    return clause(result.evidence, result)


def attribution(attributed: Attribution) -> str:
    """What explains a finding, as the clauses that follow its sentence (what explained it
    earlier first)."""
    said = _attribution(attributed)
    return said if attributed.earlier is None else f"{attribution(attributed.earlier)}; {said}"


def _attribution(attributed: Attribution) -> str:
    cause, relation = attributed.cause, attributed.relation
    culprit = cause.culprit if cause is not None and cause.culprit else "a custom gradient"
    if relation == Relation.DECLARED_SURROGATE:
        return (f"declared a deliberate surrogate gradient (--surrogate {attributed.surrogate}),"
                " so not a failure")
    if relation == Relation.EXPECTED_SURROGATE:
        return f"expected: {culprit} is a declared surrogate"
    at = f" at {cause.location}" if cause is not None and cause.location else ""
    if relation == Relation.TENSORFLOW_GRADIENT and cause is not None:
        return f"likely cause: {what(cause)}{at}; workaround: {fix(cause)}"
    if relation == Relation.CREATED_IN_CALL and cause is not None:
        return f"likely cause: {what(cause)}{at}; fix: {fix(cause)}"
    if relation == Relation.CUT_PATH and cause is not None:
        return f"likely cause: {what(cause)}{at}"
    if relation == Relation.NON_FINITE and cause is not None:
        return f"likely cause: non-finite values from {culprit}{at} (see the non-finite check)"
    where = f" (grad_fn at {cause.location})" if cause is not None and cause.location else ""
    return f"likely cause: {culprit}{where}"


def message(result: CheckResult) -> str:
    """The whole message: the sentence, then what it is attributed to."""
    if result.evidence is None:
        return result.message
    said = sentence(result.evidence, result)
    if result.attributed_to is None:
        return said
    return f"{said}; {attribution(result.attributed_to)}"
