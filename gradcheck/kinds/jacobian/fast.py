"""Fast mode: random projections ⟨u, J v⟩ from reverse mode against central differences along v
(the projection maths: gradcheck.numerics.projections); probing, narrowing down and findings."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcheck.checks.context import CheckContext, Findings
from gradcheck.engine.program import flatten_outputs
from gradcheck.evidence.fast import (
    BlockFailed,
    ProbeFailed,
    ProjectedCut,
    ProjectedGradientRaised,
    ProjectedGradShape,
    ProjectedUnconnected,
    ProjectionsAgree,
)
from gradcheck.evidence.notes import FastModeUsed, ModeReason
from gradcheck.kinds.jacobian.mode import full_mode_bytes
from gradcheck.numerics import projections, tolerances
from gradcheck.numerics.projections import PROJECTION_SAFETY, Allowance, Projection
from gradcheck.report import Kind, Status

__all__ = ["PROJECTION_SAFETY", "check_fast"]

# Narrowing down a failing block reports at most this many failing slices...
MAX_BRANCHES = 4
# ... and stops once it has spent this many evaluations of f, or this many input elements'
# worth of them (a few hundred evaluations at 10^7 elements would take minutes).
MAX_NARROWING_EVALUATIONS = 400
MAX_NARROWING_ELEMENTS = 10**9
# A random stream of its own: probe directions must not repeat --shape inputs or upstreams.
FAST_STREAM = 3

# Flat elements [start, stop) of an input: a direction that is zero elsewhere.
Span = tuple[int, int]


@dataclass(frozen=True, eq=False)
class Along:
    """What one projection compares: the outputs with their upstreams u, and the inputs (by
    slot) with their directions d and autodiff's Jᵀu; only the span's elements move when
    one is given."""

    outputs: tuple[int, ...]
    upstreams: tuple[np.ndarray, ...]
    directions: Mapping[int, np.ndarray]
    gradients: Mapping[int, np.ndarray]
    span: Span | None = None

    def on(self, span: Span) -> Along:
        return dataclasses.replace(self, span=span)


@dataclass
class Probe:
    index: int
    # None once the probe passed (its arrays are input-sized).
    along: Along | None
    result: Projection


# A failing (output, input) block: output, input slot, its projection, its failing slices.
FailingBlock = tuple[int, int, Projection, list[Span]]


@dataclass
class Counter:
    evaluations: int = 0
    backward_passes: int = 0


@dataclass
class FastChecker:
    """Runs the probes for every differentiable input at once and narrows failures down."""

    ctx: CheckContext
    reason: ModeReason
    counter: Counter = field(default_factory=Counter)
    points: dict[int, np.ndarray] = field(default_factory=dict)
    centres: dict[int, np.ndarray] = field(default_factory=dict)
    scales: dict[int, np.ndarray] = field(default_factory=dict)
    findings: Findings = field(default_factory=Findings)

    def point(self, slot_index: int) -> np.ndarray:
        """The input's value as float64, read once."""
        if slot_index not in self.points:
            self.points[slot_index] = self.ctx.program.value_of(slot_index)
        return self.points[slot_index]

    def check(self) -> Findings:
        options, findings = self.ctx.options, self.findings
        tell = self.ctx.settings.task_progress("fast mode: random projections")
        probes = max(1, options.probes)
        rng = np.random.default_rng((options.seed, FAST_STREAM))
        outputs = self.ctx.diff_outputs
        findings.notes.append(FastModeUsed(self.reason))
        self.ctx.program.announce("fast mode: random projections")
        results: list[Probe] = []
        usable = [i for i, s in enumerate(self.ctx.program.slots) if s.differentiable]
        disconnected: set[int] = set()
        for p in range(probes):
            # Probe 0 uses the resolved upstream: it also checks the VJP the user asked for.
            upstreams = (tuple(self.ctx.upstreams) if p == 0 else
                         tuple(rng.choice([-1.0, 1.0], size=self.ctx.outputs[k].shape)
                               for k in outputs))
            directions = {i: self._direction(i, rng) for i in usable}
            gradients = self._gradients(outputs, upstreams, usable, disconnected)
            if gradients is None:
                return findings
            usable = [i for i in usable if i in gradients]
            if not usable:
                return findings
            along = Along(outputs, upstreams, {i: directions[i] for i in usable}, gradients)
            probe = Probe(p, along, self.project(along))
            results.append(probe)
            if tell is not None:
                tell(p + 1, probes)
            if not probe.result.ok:  # one failing probe decides; narrowing it down is next
                break
            probe.along = None
        self._report(results, usable, disconnected)
        return findings

    def _direction(self, slot_index: int, rng: np.random.Generator) -> np.ndarray:
        """A random-sign direction scaled like the full-mode steps, so t*d is a sensible step."""
        slot = self.ctx.program.slots[slot_index]
        if slot_index not in self.scales:
            self.scales[slot_index] = np.maximum(np.abs(self.point(slot_index)), 1.0)
        return rng.choice([-1.0, 1.0], size=slot.shape) * self.scales[slot_index]

    def _gradients(self, outputs: Sequence[int], upstreams: Sequence[np.ndarray],
                   usable: Sequence[int], disconnected: set[int]
                   ) -> dict[int, np.ndarray] | None:
        """Jᵀu for every usable input in one backward pass; None (and a finding) when it raises."""
        slots = [self.ctx.program.slots[i] for i in usable]
        self.counter.backward_passes += 1
        outcomes = self.ctx.recording.gradients(outputs, slots, upstreams)
        if outcomes and outcomes[0].error is not None:  # a grad_fn that raises is a finding
            self.findings.add(Kind.CUSTOM_GRADIENT, Status.FAIL,
                              evidence=ProjectedGradientRaised(error=outcomes[0].error_line),
                              location=outcomes[0].location)
            return None
        result: dict[int, np.ndarray] = {}
        for i, slot, outcome in zip(usable, slots, outcomes):
            if outcome.value is None:
                disconnected.add(i)
                result[i] = np.zeros(slot.shape)
            elif outcome.shape != slot.shape:
                self.findings.add(
                    Kind.GRAD_SHAPE, Status.FAIL, input=slot.name,
                    evidence=ProjectedGradShape(outcome.shape, slot.shape, input=slot.name))
            else:
                result[i] = outcome.value
        return result

    def evaluate(self, points: dict[int, np.ndarray], outputs: Sequence[int]) -> list[np.ndarray]:
        """f with these inputs at the given values, as float64 arrays of the selected outputs."""
        self.counter.evaluations += 1
        leaves = flatten_outputs(self.ctx.program.call_at(points))
        return [np.asarray(leaves[k].tensor, dtype=np.float64) for k in outputs]

    def _moved(self, slot_index: int, direction: np.ndarray, step: float,
               span: Span | None) -> np.ndarray:
        """x + step * direction, the direction taken only on the span's elements when given."""
        x = self.point(slot_index)
        if span is None:
            moved = direction * step
            moved += x
            return moved
        moved = x.copy()
        start, stop = span
        moved.reshape(-1)[start:stop] += step * direction.reshape(-1)[start:stop]
        return moved

    def _along(self, along: Along, step: float) -> tuple[float, float]:
        """⟨u, f(x + step*d)⟩ and Σ|u||f| there (the scale of its rounding error)."""
        values = self.evaluate({i: self._moved(i, d, step, along.span)
                                for i, d in along.directions.items()}, along.outputs)
        inner = sum(float(np.vdot(u, v)) for u, v in zip(along.upstreams, values))
        scale = sum(projections.abs_inner(u, v) for u, v in zip(along.upstreams, values))
        return inner, scale

    def step(self) -> float:
        eps = self.ctx.options.eps
        if eps is not None:
            return eps
        return tolerances.machine_eps(self.ctx.program.compute_dtype) ** (1.0 / 3.0)

    def _allowance(self, along: Along) -> Allowance:
        """⟨Jᵀu, d⟩ from autodiff, and what random-sign rounding of J's entries allows there."""
        pairs = [(_within(along.gradients[i], along.span), _within(d, along.span))
                 for i, d in along.directions.items()]
        return projections.allowance(pairs, along.upstreams, self.ctx.tolerance)

    def project(self, along: Along) -> Projection:
        """Compare ⟨Jᵀu, d⟩ with central differences along d (only on the span's elements when
        given), with smaller steps where a kink may have been crossed."""
        return projections.project(lambda step: self._along(along, step), self._centre(along),
                                   self.step(), tolerances.machine_eps(self.ctx.tolerance_dtype),
                                   self._allowance(along))

    def _centre(self, along: Along) -> float:
        """⟨u, f(x)⟩ from the recorded outputs."""
        for k in along.outputs:
            if k not in self.centres:
                self.centres[k] = np.asarray(self.ctx.outputs[k].tensor, dtype=np.float64)
        return sum(float(np.vdot(u, self.centres[k]))
                   for u, k in zip(along.upstreams, along.outputs))

    def _block_gradient(self, k: int, upstream: np.ndarray, slot_index: int) -> np.ndarray:
        slot = self.ctx.program.slots[slot_index]
        self.counter.backward_passes += 1
        outcome = self.ctx.recording.gradient([k], slot, [upstream])
        if outcome.value is None:
            return np.zeros(slot.shape)
        return outcome.value.reshape(slot.shape)

    def narrow(self, probe: Probe) -> list[FailingBlock]:
        """Failing (output, input) blocks of a failing probe, each with its failing slices."""
        assert probe.along is not None
        blocks: list[FailingBlock] = []
        whole = probe.along
        single = len(whole.outputs) == 1 and len(whole.directions) == 1
        for k, upstream in zip(whole.outputs, whole.upstreams):
            for i, direction in whole.directions.items():
                if single:
                    along, block = whole, probe.result
                else:
                    along = Along((k,), (upstream,), {i: direction},
                                  {i: self._block_gradient(k, upstream, i)})
                    block = self.project(along)
                if not block.ok:
                    blocks.append((k, i, block, self._bisect(along, block) if _finite(block)
                                   else [(0, direction.size)]))
        return blocks

    def _bisect(self, along: Along, block: Projection) -> list[Span]:
        """Failing element ranges of one block, depth first from the left, down to single
        elements: the left half is measured, and the right half's projection is the parent's
        minus the left's when both were extrapolated (autodiff and finite differences are
        linear in the direction), so a failing pair of halves costs one measurement until the
        right half's turn comes (if it comes: at most MAX_BRANCHES slices are reported); it
        is measured then, before it is split or reported."""
        (direction,) = along.directions.values()
        n = direction.size
        budget = self.counter.evaluations + min(MAX_NARROWING_EVALUATIONS,
                                                MAX_NARROWING_ELEMENTS // max(n, 1))
        # (start, stop, its projection if known, whether that projection was only deduced)
        pending: list[tuple[int, int, Projection | None, bool]] = [(0, n, block, False)]
        found: list[Span] = []
        while pending and len(found) < MAX_BRANCHES:
            start, stop, known, deduced = pending.pop()
            if deduced and self.counter.evaluations < budget:
                known = self.project(along.on((start, stop)))
                if known.ok:
                    continue
            if stop - start <= 1 or self.counter.evaluations >= budget:
                found.append((start, stop))
                continue
            middle = (start + stop) // 2
            left = self.project(along.on((start, middle)))
            right = None if known is None else projections.remainder(
                known, left, functools.partial(self._allowance, along.on((middle, stop))))
            if left.ok:  # the parent failed, so the error is in the other half
                pending.append((middle, stop, right, False))
                continue
            if right is None:
                right = self.project(along.on((middle, stop)))
                if not right.ok:
                    pending.append((middle, stop, right, False))
            elif not right.ok:
                pending.append((middle, stop, right, True))
            pending.append((start, middle, left, False))
        return found

    def _fields(self, results: Sequence[Probe], worst: Projection) -> dict[str, Any]:
        """The fields of Projections, the evidence every fast-mode verdict shares."""
        shapes = [self.ctx.outputs[k].shape for k in self.ctx.diff_outputs]
        return {"mode_reason": self.reason, "probes": max(1, self.ctx.options.probes),
                "probes_run": len(results),
                "failed_probes": tuple(p.index for p in results if not p.result.ok),
                "evaluations": self.counter.evaluations,
                "backward_passes": self.counter.backward_passes, "seed": self.ctx.options.seed,
                "tolerance": worst.allowed,
                "full_mode_bytes": full_mode_bytes(self.ctx.program, shapes).needed}

    def _report(self, results: list[Probe], usable: Sequence[int],
                disconnected: set[int]) -> None:
        findings = self.findings
        names = [self.ctx.program.slots[i].name for i in usable]
        single_input = names[0] if len(names) == 1 else None
        worst = max(results, key=lambda p: p.result.error / max(p.result.allowed, 1e-300)).result
        probe = results[-1]
        if probe.result.ok:
            agree = ProjectionsAgree(**self._fields(results, worst), largest_error=worst.error)
            findings.add(Kind.FAST, Status.PASS, evidence=agree, input=single_input,
                         max_abs_err=worst.error)
            for i in disconnected:
                if self.ctx.wants(Kind.CONNECTED):
                    name = self.ctx.program.slots[i].name
                    findings.add(Kind.CONNECTED, Status.PASS, input=name,
                                 evidence=ProjectedUnconnected(input=name))
            return
        blocks = self.narrow(probe)
        fields = self._fields(results, worst)
        if not blocks:
            failed = probe.result
            findings.add(Kind.FAST, Status.FAIL, input=single_input, max_abs_err=failed.error,
                         evidence=ProbeFailed(**fields, autodiff=failed.autodiff,
                                              finite_difference=failed.finite_difference,
                                              allowed=failed.allowed))
            return
        for k, i, block, slices in blocks:
            self._block_finding(fields, k, i, block, slices, i in disconnected)

    def _block_finding(self, fields: dict[str, Any], k: int, i: int, block: Projection,
                       slices: list[Span], disconnected: bool) -> None:
        slot = self.ctx.program.slots[i]
        output = self.ctx.outputs[k]
        first = tuple(int(v) for v in np.unravel_index(slices[0][0], slot.shape)) \
            if slot.shape else ()
        where = {"input": slot.name, "output": output.name}
        cut = disconnected and self.ctx.wants(Kind.CONNECTED)
        evidence = (ProjectedCut if cut else BlockFailed)(
            **fields, autodiff=block.autodiff, finite_difference=block.finite_difference,
            allowed=block.allowed, elements=tuple(slices), output=output.name, input=slot.name,
            input_shape=slot.shape)
        if cut:
            self.findings.add(Kind.CONNECTED, Status.FAIL, evidence=evidence, worst_index=first,
                              **where)
            return
        self.findings.add(Kind.FAST, Status.FAIL, evidence=evidence, worst_index=first,
                          max_abs_err=block.error, **where)


def _finite(block: Projection) -> bool:
    """Whether bisecting a failing block can tell its slices apart: a NaN or inf projection
    (a NaN loss) fails every slice, each costing evaluations of f, to find where, which the
    non-finite check names."""
    return bool(np.isfinite(block.autodiff) and np.isfinite(block.finite_difference))


def _within(array: np.ndarray, span: Span | None) -> np.ndarray:
    return array if span is None else array.reshape(-1)[span[0]:span[1]]


def check_fast(ctx: CheckContext, reason: ModeReason) -> Findings:
    """The fast-mode findings (and notes)."""
    return FastChecker(ctx, reason).check()
