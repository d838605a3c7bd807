"""What a check saw, as data: one frozen Evidence subclass per kind of finding.

The checks and the diagnosis build these; every sentence about them is made in
gradcheck.render.sentences (CheckResult.message is rendered from the evidence, never written
by the core, appended to or parsed back). Fields marked `internal()` stay out of the JSON
report's `details`.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class Evidence:
    """The base of every kind of evidence."""

    def published(self) -> dict[str, Any]:
        """The JSON `details`: the fields not marked internal (evidence that retells another
        finding publishes that finding's)."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)
                if not field.metadata.get("internal")}


def internal(default: Any = None) -> Any:
    """A field the renderers may read but the JSON `details` does not publish."""
    return dataclasses.field(default=default, metadata={"internal": True})


def public_fields(evidence: Evidence) -> dict[str, Any]:
    """The evidence's fields the JSON report publishes as `details`, by name."""
    return evidence.published()
