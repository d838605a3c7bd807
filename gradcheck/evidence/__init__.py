"""What a check saw, as data: one frozen Evidence subclass per kind of finding.

The checks and the diagnosis build these, and each says itself: `words` (the whole finding)
and `clause` (its headline), made from its facts and the CheckResult when the message is first
read (never written by the core, appended to or parsed back). Fields marked `internal()` stay
out of the JSON report's `details`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gradcheck.evidence.finding import Finding
from gradcheck.evidence.location import Location
from gradcheck.evidence.notes import Note

__all__ = ["Evidence", "Finding", "Location", "internal", "public_fields"]


@dataclasses.dataclass(frozen=True)
class Evidence:
    """The base of every kind of evidence."""

    def words(self, result: Finding) -> str:
        """The whole finding in words (no attribution); every kind of finding says its own."""
        raise NotImplementedError(f"{type(self).__name__} has no words")

    def clause(self, result: Finding) -> str:
        """The finding as the one clause a table row shows: by default its whole words."""
        return self.words(result)

    def underlying(self) -> Evidence:
        """The evidence that was judged (for evidence that retells another finding: that
        finding's), whose matrices renderers show."""
        return self

    def published(self) -> dict[str, Any]:
        """The JSON `details`: the fields not marked internal (evidence that retells another
        finding publishes that finding's)."""
        return _public(self)


def internal(default: Any = None) -> Any:
    """A field the renderers may read but the JSON `details` does not publish."""
    return dataclasses.field(default=default, metadata={"internal": True})


def public_fields(evidence: Any) -> dict[str, Any]:
    """The JSON `details` of a finding's evidence (see Evidence.published)."""
    return evidence.published() if isinstance(evidence, Evidence) else _public(evidence)


def public_items(value: Any) -> dict[str, Any]:
    """A dataclass's fields not marked internal, by name, as they are (the one walk of them)."""
    return {field.name: getattr(value, field.name)
            for field in dataclasses.fields(value) if not field.metadata.get("internal")}


def _public(value: Any) -> dict[str, Any]:
    """A dataclass's fields not marked internal, by name (a field that is itself a dataclass:
    its public fields, by name)."""
    return {name: _published(item) for name, item in public_items(value).items()}


def _published(value: Any) -> Any:
    if isinstance(value, Location):
        return str(value)
    if isinstance(value, Note):
        return value  # the JSON report renders it as its sentence
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _public(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_published(item) for item in value)
    return value
