"""Evidence of the strategy check: the gradient a MirroredStrategy step applies against the
single-device gradient of the whole batch."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence


@dataclasses.dataclass(frozen=True)
class ReplicaGradient(Evidence):
    """`state`: same, mean (each replica's loss a mean over its share: N times too large),
    regularisation (the model's losses added on every replica), different (per-replica
    statistics, such as batch normalisation's, or randomness); over `replicas` replicas."""

    state: str
    replicas: int
    error: float
    ratio: float
    batch_norm: bool = False
    workers: bool = False  # MultiWorkerMirroredStrategy's local worker processes
