"""Evidence the diagnosis finds itself: a custom gradient judged on its own, where a gradient
path is cut."""

from __future__ import annotations

import dataclasses
from typing import Any

from gradcheck.evidence import Evidence, internal


@dataclasses.dataclass(frozen=True)
class SiteMistake(Evidence):
    """A custom gradient's mistake, told by its cause; `finding` (a CheckResult: this layer
    lies below the report's) is the finding of its own check it retells, whose JSON `details`
    it publishes."""

    finding: Any = internal(None)

    def published(self) -> dict[str, Any]:
        evidence = None if self.finding is None else self.finding.evidence
        return {} if evidence is None else evidence.published()


@dataclasses.dataclass(frozen=True)
class SiteCorrect(Evidence):
    """The custom gradient `site` returns uᵀJ, checked on its own."""

    site: str = internal("")


@dataclasses.dataclass(frozen=True)
class SiteUnchecked(Evidence):
    """The custom gradient `name` could not be checked on its own: `error`."""

    name: str = internal("")
    error: str = internal("")


@dataclasses.dataclass(frozen=True)
class SiteNoForwardMode(Evidence):
    """Forward mode gives no JVP through the custom gradient `site`."""

    site: str = internal("")


@dataclasses.dataclass(frozen=True)
class CutFound(Evidence):
    """The gradient path is cut where the result's cause says."""


@dataclasses.dataclass(frozen=True)
class CutNotFound(Evidence):
    """The gradient path from the result's input is lost, but not at an op found (`note`:
    why, when known)."""

    note: str | None = internal()
