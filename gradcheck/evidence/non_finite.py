"""Evidence of the non-finite check: an output of f, or a gradient, that is NaN or infinite,
and the ops that first made it so."""

from __future__ import annotations

import dataclasses
from typing import Any

from gradcheck.evidence import Evidence, Finding, Location, internal
from gradcheck.evidence.finding import stated_cause
from gradcheck.evidence.text import first_clause


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

    def words(self, result: Finding) -> str:
        cause = stated_cause(result)
        if not self.origins:
            return f"{self._seen()}; {cause.what}"
        return f"{self._seen()}: {cause.what}; fix: {cause.fix}"

    def clause(self, result: Finding) -> str:
        return first_clause(self.words(result))

    def _seen(self) -> str:
        which = (f"the gradient for {self.name}" if self.gradient
                 else self.name if self.name.startswith("the ")  # "the loss" of a step
                 else f"f's output {self.name}")
        if self.order == 2:
            which = (f"the second derivative for {self.name} (the gradient, which is finite,"
                     " differentiated by nested tapes)")
        index = f" (first at {list(self.index)})" if self.index else ""
        lead = (f"under {self.variant} only (eagerly it is finite), "
                if self.variant != "eager" else "")
        return (f"{lead}{which} is {self.produced} in {self.count} of {self.size}"
                f" element(s){index}")


@dataclasses.dataclass(frozen=True)
class NonFiniteUntraceable(Evidence):
    """f or its gradient is not finite, and f cannot be traced to find the op."""

    def words(self, result: Finding) -> str:
        return ("f or its gradient is NaN or infinite at this point, and f cannot be traced into"
                " a graph (tf.function) to find the op that makes it so")


@dataclasses.dataclass(frozen=True)
class NoVerdictAtNonFinite(Evidence):
    """A check that compares values of f (`check`) gives no verdict: f's output `output` is
    `produced` at the point, so both sides are."""

    check: str
    output: str
    produced: str

    def words(self, result: Finding) -> str:
        return (f"no {self.check} verdict: f's output {self.output} is {self.produced} at this"
                " point, so the values compared are too (see the non-finite check)")
