"""Transitional: the words of a check not yet converted to typed evidence, as it wrote them."""

from __future__ import annotations

from gradcheck.evidence.worded import Worded
from gradcheck.render.sentences import clause, first_clause, sentence
from gradcheck.report import CheckResult


@sentence.register
def _worded(evidence: Worded, result: CheckResult) -> str:
    return evidence.text


@clause.register
def _worded_clause(evidence: Worded, result: CheckResult) -> str:
    return first_clause(evidence.text)
