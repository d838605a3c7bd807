"""What a finding's words read of the result that carries them: gradcheck.report's CheckResult
and Cause, a layer above, satisfy these without evidence importing them."""

from __future__ import annotations

from typing import Any, Protocol

from gradcheck.evidence.location import Location


class StatedCause(Protocol):
    """A finding's cause as its words read it (report.Cause)."""

    @property
    def mistake(self) -> str: ...

    @property
    def culprit(self) -> str | None: ...

    @property
    def location(self) -> Location | None: ...

    @property
    def facts(self) -> Any: ...

    @property
    def what(self) -> str: ...

    @property
    def fix(self) -> str | None: ...


class Finding(Protocol):
    """A finding as its evidence's words read it (report.CheckResult)."""

    @property
    def check(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def input(self) -> str | None: ...

    @property
    def output(self) -> str | None: ...

    @property
    def location(self) -> Location | None: ...

    @property
    def cause(self) -> StatedCause | None: ...

    @property
    def max_abs_err(self) -> float | None: ...

    @property
    def max_rel_err(self) -> float | None: ...

    @property
    def worst_index(self) -> tuple[int, ...] | None: ...

    @property
    def excess(self) -> float | None: ...

    @property
    def attributed_to(self) -> Any: ...


def stated_cause(result: Finding) -> StatedCause:
    """The cause of a finding its cause tells (such evidence is always built with one)."""
    assert result.cause is not None, "a finding told by its cause has one"
    return result.cause
