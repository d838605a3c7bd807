"""A finding explained by what the diagnosis found (attributed_to), never by words appended."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gradcheck.evidence.worded import Worded
from gradcheck.report import Attribution, CheckResult


def attribute(result: CheckResult, attributed: Attribution, **changes: Any) -> CheckResult:
    """The result, explained by `attributed` (and with `changes` made)."""
    if result.evidence is None or result.attributed_to is not None:
        # Transitional: an unconverted result (or one explained twice) keeps its words as
        # they stand, and the attribution follows them.
        result = replace(result, evidence=Worded(result.message), attributed_to=None)
    return replace(result, attributed_to=attributed, **changes)
