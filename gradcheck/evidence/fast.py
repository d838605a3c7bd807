"""Evidence of fast mode: random projections ⟨u, J v⟩ against central differences along v."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence, internal
from gradcheck.evidence.connected import GradShape
from gradcheck.evidence.gradients import NoGradient
from gradcheck.evidence.notes import ModeReason


@dataclasses.dataclass(frozen=True, kw_only=True)
class Projections(Evidence):
    """What the random projections did (the details of every fast-mode verdict), and how
    small an error they can miss."""

    mode_reason: ModeReason  # published as its sentence
    probes: int
    probes_run: int
    failed_probes: tuple[int, ...]
    evaluations: int
    backward_passes: int
    seed: int = internal(0)
    # What the worst probe allowed: about the smallest error the projections see.
    tolerance: float = internal(0.0)
    full_mode_bytes: int = internal(0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProjectionsAgree(Projections):
    """Every probe's ⟨Jᵀu, v⟩ matched central differences."""

    largest_error: float = internal(0.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProbeFailed(Projections):
    """A failing probe's ⟨Jᵀu, v⟩ (`autodiff`) is off the central differences by more than
    allowed, and no (output, input) block fails on its own."""

    autodiff: float = internal(0.0)
    finite_difference: float = internal(0.0)
    allowed: float = internal(0.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BlockFailed(ProbeFailed):
    """The failing probe narrowed down to one (output, input) block and its failing
    `elements`: [start, stop) ranges of the input's flat elements."""

    elements: tuple[tuple[int, int], ...]
    output: str = internal("")
    input: str = internal("")
    input_shape: tuple[int, ...] = internal(())


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProjectedCut(BlockFailed):
    """Autodiff gives None for `input`, but the differences show `output` depends on it
    (around `elements`)."""


@dataclasses.dataclass(frozen=True)
class ProjectedUnconnected(NoGradient):
    """Autodiff gives None for `input`, and the projections agree nothing depends on it."""

    input: str = internal("")


@dataclasses.dataclass(frozen=True)
class ProjectedGradShape(GradShape):
    """The gradient with respect to `input`, of all outputs at once, has the wrong shape."""


@dataclasses.dataclass(frozen=True)
class ProjectedGradientRaised(Evidence):
    """Computing the gradient raised (a grad_fn that raises): `error` is its first line."""

    error: str = internal("")
