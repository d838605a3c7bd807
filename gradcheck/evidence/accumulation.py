"""Evidence of the accumulation check: K micro-batches' accumulated gradient against the whole
batch's."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence


@dataclasses.dataclass(frozen=True)
class AccumulatedGradient(Evidence):
    """`state`: same (the mean of the micro-batch gradients is the whole batch's), sum (it is
    1/K of it: f sums over its batch), different (per-micro-batch statistics such as batch
    normalisation's, or a mean over a count that differs between micro-batches)."""

    state: str
    micro_batches: int
    error: float
    ratio: float
    batch_norm: bool = False
