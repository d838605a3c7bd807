"""Evidence of the health check: one trainable weight's gradient over the last steps of a
training run (what gradcheck.Watch recorded with health=True)."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence


@dataclasses.dataclass(frozen=True)
class GradientHealth(Evidence):
    """`state`: healthy, vanishing (its norm below `VANISHING` of the largest weight's),
    exploding (its last norm `growth` times its median over the steps before), or dead (at
    least `DEAD` of its elements exactly 0 in every recorded step: units that never fire)."""

    state: str
    steps: int
    last_norm: float
    median_norm: float
    largest_norm: float
    zero_fraction: float
    growth: float
