"""The names of f's arguments and of the leaves of its result, as the loaders make them
and the engine, the checks and the diagnosis use them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NamedArgument:
    """One argument of f: its name, value, and place in the call (a position, or a keyword)."""

    name: str
    value: Any
    position: int | None  # index into args, or None for a keyword argument
    keyword: str | None = None


@dataclass(frozen=True)
class OutputPath:
    """Where one leaf sits in f's result: the result's name and the keys and indices down to
    the leaf; shown as y, y[1], y['mean']."""

    root: str
    keys: tuple[Any, ...] = ()

    def __str__(self) -> str:
        return self.root + "".join(f"[{key!r}]" for key in self.keys)

    def child(self, key: Any) -> OutputPath:
        return OutputPath(self.root, (*self.keys, key))

    @property
    def last(self) -> str:
        """The innermost key, as an upstream .npz may name the leaf ('mean' for y['mean'])."""
        return str(self.keys[-1]) if self.keys else self.root
