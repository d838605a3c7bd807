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


def internal(default: Any = None) -> Any:
    """A field the renderers may read but the JSON `details` does not publish."""
    return dataclasses.field(default=default, metadata={"internal": True})


def public_fields(evidence: Evidence) -> dict[str, Any]:
    """The evidence's fields the JSON report publishes as `details`, by name."""
    return {field.name: getattr(evidence, field.name) for field in dataclasses.fields(evidence)
            if not field.metadata.get("internal")}
