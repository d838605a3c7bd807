"""The names of f's arguments and of the leaves of its result, as the loaders make them
and the engine, the checks and the diagnosis use them; the leaves of a structured argument."""

from __future__ import annotations

from collections.abc import Mapping
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
        return leaf_name(self.root, self.keys)

    def child(self, key: Any) -> OutputPath:
        return OutputPath(self.root, (*self.keys, key))

    @property
    def last(self) -> str:
        """The innermost key, as an upstream .npz may name the leaf ('mean' for y['mean'])."""
        return str(self.keys[-1]) if self.keys else self.root


def leaf_name(root: str, keys: tuple[Any, ...]) -> str:
    """A leaf named by the keys and indices down to it: y[1], d['mean']."""
    return root + "".join(f"[{key!r}]" for key in keys)


def _numbers(value: Any) -> bool:
    """A Python number, or a (nested) list of them: one array, not a structure."""
    if isinstance(value, (list, tuple)):
        return all(_numbers(item) for item in value)
    return isinstance(value, (bool, int, float, complex))


def is_structure(value: Any) -> bool:
    """A dict, or a list or tuple of tensors or arrays (a Keras model's several inputs): f
    takes it whole, and gradcheck differentiates each of its leaves."""
    if isinstance(value, Mapping):
        return bool(value)
    return isinstance(value, (list, tuple)) and bool(value) and not _numbers(value)


def structure_leaves(value: Any, keys: tuple[Any, ...] = ()
                     ) -> list[tuple[tuple[Any, ...], Any]]:
    """Each leaf of an argument with the keys and indices down to it (one leaf, with no keys,
    for an argument that is not a structure)."""
    if not is_structure(value):
        return [(keys, value)]
    items = value.items() if isinstance(value, Mapping) else enumerate(value)
    return [leaf for key, item in items for leaf in structure_leaves(item, (*keys, key))]


def pack(structure: Any, leaves: Mapping[tuple[Any, ...], Any], keys: tuple[Any, ...] = ()
         ) -> Any:
    """The structure rebuilt around these leaves (a dict, list, tuple or namedtuple, as given)."""
    if keys in leaves:
        return leaves[keys]
    if isinstance(structure, Mapping):
        packed = {key: pack(item, leaves, (*keys, key)) for key, item in structure.items()}
        kind: Any = type(structure)
        return packed if kind is dict else kind(packed)
    items = [pack(item, leaves, (*keys, index)) for index, item in enumerate(structure)]
    return type(structure)(*items) if hasattr(structure, "_fields") else type(structure)(items)
