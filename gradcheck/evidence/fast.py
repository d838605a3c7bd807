"""Evidence of fast mode: random projections ⟨u, J v⟩ against central differences along v, and
its words."""

from __future__ import annotations

import dataclasses

import numpy as np

from gradcheck.evidence import Evidence, internal
from gradcheck.evidence.connected import GradShape
from gradcheck.evidence.finding import Finding
from gradcheck.evidence.gradients import NoGradient
from gradcheck.evidence.notes import ModeReason
from gradcheck.spelling import format_index, format_size


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

    def words(self, result: Finding) -> str:
        return "; ".join(part for part in (self.clause(result), self._continuation()) if part)

    def _continuation(self) -> str:
        """What the whole message says after the headline: what was found and what can be
        missed."""
        return self._can_miss()

    def _can_miss(self) -> str:
        return (f"{self.probes_run} random projection(s) ran (seed {self.seed}); an error whose"
                f" effect on ⟨u, J v⟩ stays below the tolerance (here about {self.tolerance:.1e})"
                " is missed, so errors in a few small elements can go unseen: --mode full checks"
                f" every element (it needs about {format_size(self.full_mode_bytes)} of"
                " --max-memory)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProjectionsAgree(Projections):
    """Every probe's ⟨Jᵀu, v⟩ matched central differences."""

    largest_error: float = internal(0.0)

    def clause(self, result: Finding) -> str:
        return (f"⟨u, J v⟩ from tape.gradient matches central differences along v for every"
                f" probe (largest discrepancy {self.largest_error:.1e}, allowed"
                f" {self.tolerance:.1e})")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProbeFailed(Projections):
    """A failing probe's ⟨Jᵀu, v⟩ (`autodiff`) is off the central differences by more than
    allowed, and no (output, input) block fails on its own."""

    autodiff: float = internal(0.0)
    finite_difference: float = internal(0.0)
    allowed: float = internal(0.0)

    def _failed_probe(self) -> str:
        later = " (the later ones were not run)" if self.probes_run < self.probes else ""
        return f"probe {self.failed_probes[0] + 1} of {self.probes} failed{later}"

    def clause(self, result: Finding) -> str:
        return (f"{self._failed_probe()}: ⟨Jᵀu, v⟩ = {self.autodiff:.6g} from tape.gradient,"
                f" central differences along v give {self.finite_difference:.6g} (allowed"
                f" {self.allowed:.1e})")

    def _continuation(self) -> str:
        return f"no single (output, input) block fails on its own; {self._can_miss()}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class BlockFailed(ProbeFailed):
    """The failing probe narrowed down to one (output, input) block and its failing
    `elements`: [start, stop) ranges of the input's flat elements."""

    elements: tuple[tuple[int, int], ...]
    output: str = internal("")
    input: str = internal("")
    input_shape: tuple[int, ...] = internal(())

    def clause(self, result: Finding) -> str:
        return (f"{self._failed_probe()}: for {self.output} and {self.input}, ⟨Jᵀu, v⟩ from"
                f" tape.gradient is {self.autodiff:.6g} but central differences along v give"
                f" {self.finite_difference:.6g} (allowed {self.allowed:.1e})")

    def _continuation(self) -> str:
        return f"the gradient is wrong around {self.input}{self._around()}; {self._can_miss()}"

    def _around(self) -> str:
        """The failing elements, as indices of the input (a range: its ends)."""
        return ", ".join(_slice(self.input_shape, a, b) for a, b in self.elements)


def _slice(shape: tuple[int, ...], start: int, stop: int) -> str:
    def index(flat: int) -> str:
        return format_index(tuple(int(v) for v in np.unravel_index(flat, shape)))

    if stop - start == 1:
        return index(start)
    return f"{index(start)}..{index(stop - 1)} ({stop - start} elements)"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProjectedCut(BlockFailed):
    """Autodiff gives None for `input`, but the differences show `output` depends on it
    (around `elements`)."""

    def clause(self, result: Finding) -> str:
        return (f"the gradient path from {self.input} to {self.output} is cut: autodiff returns"
                f" None, but central differences along random directions show {self.output}"
                f" depends on {self.input} (around {self._around()})")

    def _continuation(self) -> str:
        return ""


@dataclasses.dataclass(frozen=True)
class ProjectedUnconnected(NoGradient):
    """Autodiff gives None for `input`, and the projections agree nothing depends on it."""

    input: str = internal("")

    def words(self, result: Finding) -> str:
        return (f"autodiff returns None for {self.input} and the random projections agree that"
                f" the outputs do not depend on {self.input}")


@dataclasses.dataclass(frozen=True)
class ProjectedGradShape(GradShape):
    """The gradient with respect to `input`, of all outputs at once, has the wrong shape."""

    def words(self, result: Finding) -> str:
        return (f"the gradient with respect to {self.input} has shape {self.gradient_shape},"
                f" but {self.input} has shape {self.input_shape}: a gradient (and a"
                " custom_gradient grad_fn) must return uᵀJ with its input's shape")


@dataclasses.dataclass(frozen=True)
class ProjectedGradientRaised(Evidence):
    """Computing the gradient raised (a grad_fn that raises): `error` is its first line."""

    error: str = internal("")

    def words(self, result: Finding) -> str:
        return f"computing the gradient raised {self.error}"
