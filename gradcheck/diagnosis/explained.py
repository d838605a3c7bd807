"""A finding explained by what the diagnosis found (attributed_to), never by words appended."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gradcheck.report import Attribution, CheckResult


def attribute(result: CheckResult, attributed: Attribution, **changes: Any) -> CheckResult:
    """The result, explained by `attributed` after whatever explained it already (and with
    `changes` made). A result without evidence (a hand-built one) keeps its message."""
    if result.attributed_to is not None:
        attributed = replace(attributed, earlier=result.attributed_to)
    return replace(result, attributed_to=attributed, **changes)
