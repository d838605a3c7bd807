"""Evidence of saved models: custom gradients lost in the save, and the `against` check (a
TARGET's gradients against another's, a loaded model's against its original's)."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence


@dataclasses.dataclass(frozen=True)
class UnsavedGradients(Evidence):
    """TensorFlow imported `functions` without the custom gradients they were saved with, and
    a gradient through them fails: no gradient for their `op`."""

    functions: tuple[str, ...]
    op: str


@dataclasses.dataclass(frozen=True)
class AgainstOriginal(Evidence):
    """TARGET's VJP (with the same random upstream) against `original`'s at the same
    arguments. `state`: same; values (f's own values differ: the saved model computes
    something else); gradient (the same values, another gradient of `source`); missing (no
    gradient where the original has one); outputs (other outputs). `unsaved`: functions
    imported without their custom gradients."""

    state: str
    original: str
    value_error: float = 0.0
    gradient_error: float = 0.0
    source: str | None = None
    unsaved: tuple[str, ...] = ()
