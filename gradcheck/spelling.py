"""How values are written in reports and messages: enums as their JSON names, element indices,
byte sizes."""

from __future__ import annotations

import enum


class Spelled(str, enum.Enum):
    """An enum that is its JSON spelling: compares equal to it and prints as it."""

    def __str__(self) -> str:
        return str(self.value)


def format_index(index: tuple[int, ...] | None, separator: str = ", ") -> str:
    """[1, 0] for an element index; empty for none."""
    return "" if index is None else "[" + separator.join(str(i) for i in index) + "]"


def format_size(size: float) -> str:
    """512B, 1.5KiB, 2.0GiB...: bytes in binary units, one decimal above a KiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024:
            return f"{size:.0f}{unit}" if unit == "B" else f"{size:.1f}{unit}"
        size /= 1024
    return f"{size:.1f}PiB"
