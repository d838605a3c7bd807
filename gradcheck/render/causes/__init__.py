"""Kept for the sentences of gradcheck.render.sentences not yet converted (removed once they
are): a cause's words are its facts' own (gradcheck.evidence.causes), read as Cause.what and
Cause.fix."""

from __future__ import annotations

from gradcheck.evidence.causes import kink_place
from gradcheck.report import Cause, CheckResult

__all__ = ["fix", "kink_place", "stated_cause", "what"]


def what(cause: Cause) -> str:
    """What is wrong, in words."""
    return cause.what


def fix(cause: Cause) -> str | None:
    """What to do about it, when that follows from the cause."""
    return cause.fix


def stated_cause(result: CheckResult) -> Cause:
    """The cause of a finding whose evidence its cause tells (that evidence always has one)."""
    assert result.cause is not None, f"{type(result.evidence).__name__} is told by its cause"
    return result.cause
