"""Evidence of the non-finite check: an output of f, or a gradient, that is NaN or infinite,
and the ops that first made it so."""

from __future__ import annotations

import dataclasses
from typing import Any

from gradcheck.evidence import Evidence, Location, internal


@dataclasses.dataclass(frozen=True)
class NonFiniteOrigin:
    """One op that made non-finite values out of finite ones (`kernel`: the graph op;
    `backward`: its gradient did), at the user's line."""

    op: str
    kernel: str
    location: Location | None
    backward: bool
    produced: str


@dataclasses.dataclass(frozen=True)
class NonFiniteSeen(Evidence):
    """`name` (f's output, or the gradient for an input when `gradient`) is `produced` (NaN,
    inf, -inf) in `count` of `size` elements, first at `index`; under
    `variant` only when it is not "eager". Its `origins`, first op first (none found: the
    result's cause says so); the cause tells what the first one does and the fix."""

    variant: str
    origins: tuple[NonFiniteOrigin, ...]
    name: str = internal("")
    gradient: bool = internal(False)
    produced: str = internal("")
    count: int = internal(0)
    size: int = internal(0)
    index: tuple[int, ...] | None = internal(None)
    order: int = internal(1)  # 2: the second derivative (nested tapes) for `name`

    def published(self) -> dict[str, Any]:
        """The variant and the origins; nothing when no origin was found."""
        return super().published() if self.origins else {}


@dataclasses.dataclass(frozen=True)
class NonFiniteUntraceable(Evidence):
    """f or its gradient is not finite, and f cannot be traced to find the op."""


@dataclasses.dataclass(frozen=True)
class NoVerdictAtNonFinite(Evidence):
    """A check that compares values of f (`check`) gives no verdict: f's output `output` is
    `produced` at the point, so both sides are."""

    check: str
    output: str
    produced: str
