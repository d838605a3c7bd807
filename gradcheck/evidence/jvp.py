"""Evidence of the jvp check: forward mode (ForwardAccumulator) against reverse mode."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence, internal


@dataclasses.dataclass(frozen=True)
class NoReverseVJP(Evidence):
    """Reverse mode gave no VJP of the right shape for `input` (other checks say why)."""

    input: str = internal("")


@dataclasses.dataclass(frozen=True)
class ForwardRaised(Evidence):
    """Forward mode raised `error` (its first line) for `input`."""

    input: str = internal("")
    error: str = internal("")


@dataclasses.dataclass(frozen=True)
class NoForwardMode(Evidence):
    """Forward mode gave None for every output although reverse mode gives a gradient."""

    input: str = internal("")


@dataclasses.dataclass(frozen=True)
class ModeNotFinite(Evidence):
    """⟨u, Jv⟩ (forward) and ⟨Jᵀu, v⟩ (reverse), one of them not finite."""

    input: str = internal("")
    forward: float = internal(0.0)
    reverse: float = internal(0.0)


@dataclasses.dataclass(frozen=True)
class ReverseNotFinite(ModeNotFinite):
    """Reverse mode is not finite: the non-finite check's."""


@dataclasses.dataclass(frozen=True)
class ForwardNotFinite(ModeNotFinite):
    """Forward mode alone is not finite."""


@dataclasses.dataclass(frozen=True)
class ModesCompared(Evidence):
    """⟨u, Jv⟩ by forward mode, ⟨Jᵀu, v⟩ by reverse mode, and the difference allowed."""

    forward: float
    reverse: float
    allowed: float
    input: str = internal("")


@dataclasses.dataclass(frozen=True)
class ModesIndependent(ModesCompared):
    """Both modes say the outputs do not depend on `input`."""


@dataclasses.dataclass(frozen=True)
class ModesAgree(ModesCompared):
    """The two modes agree within the allowed difference."""


@dataclasses.dataclass(frozen=True)
class ModesDisagree(ModesCompared):
    """The two modes disagree: a gradient is inconsistent."""


@dataclasses.dataclass(frozen=True)
class NestedModesDisagree(ModesCompared):
    """The two modes disagree where f runs a ForwardAccumulator of its own: forward mode over
    f nests accumulators (forward over forward), which is TensorFlow's to get right."""


@dataclasses.dataclass(frozen=True)
class ForwardGap(Evidence):
    """No verdict: TensorFlow has no forward-mode rule on the path (its gap, not the user's),
    as the finding's cause says."""

    input: str = internal("")


@dataclasses.dataclass(frozen=True)
class ComparedForwardGap(ForwardGap):
    """A forward-mode gap found after the two modes disagreed: their numbers are kept."""

    forward: float = 0.0
    reverse: float = 0.0
    allowed: float = 0.0
