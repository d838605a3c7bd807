"""Fast mode: random projections ⟨u, J v⟩ from reverse mode against central differences along v."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcheck.checks.context import CheckContext, Findings
from gradcheck.checks.mode import full_mode_bytes
from gradcheck.numerics import tolerances
from gradcheck.options import format_size
from gradcheck.report import Kind, Status, format_index
from gradcheck.tf.program import flatten_outputs

# Random-sign terms (tolerated per-element errors seen through a random projection) are allowed
# this many standard deviations before a probe fails.
PROJECTION_SAFETY = 5.0
# Narrowing down a failing block reports at most this many failing slices...
MAX_BRANCHES = 4
# ... and stops once it has spent this many evaluations of f, or this many input elements'
# worth of them (a few hundred evaluations at 10^7 elements would take minutes).
MAX_NARROWING_EVALUATIONS = 400
MAX_NARROWING_ELEMENTS = 10**9
# When a discrepancy is within this factor of the finite differences' own inconsistency
# (|d(t) - d(2t)|, or one-sided differences that disagree: a kink such as ReLU's crossed by
# the step), smaller steps are tried.
KINK_FACTOR = 10.0
SMALLER_STEPS = (4.0, 16.0)
# A random stream of its own: probe directions must not repeat --shape inputs or upstreams.
FAST_STREAM = 3


@dataclass(frozen=True)
class Projection:
    """One comparison of ⟨Jᵀu, d⟩ (autodiff) with the central difference of ⟨u, f⟩ along d."""

    autodiff: float
    finite_difference: float
    error_estimate: float
    allowed: float
    # finite_difference is Richardson's (4 d(t) - d(2t)) / 3 rather than d(t).
    extrapolated: bool = False
    # Half the gap between the one-sided differences at x: O(t) where f is smooth along d,
    # the size of a slope change where the step crosses a kink (ReLU) close to x.
    asymmetry: float = 0.0
    # What rounding alone can put into d(t) (and so into the two above).
    rounding: float = 0.0
    # The step t of the finite differences (smaller than the default after a kink).
    step: float = 0.0

    @property
    def inconsistency(self) -> float:
        """How far the finite differences disagree with themselves beyond rounding."""
        return (max(self.error_estimate, self.asymmetry)
                - tolerances.ERROR_ESTIMATE_SAFETY * self.rounding)

    @property
    def error(self) -> float:
        return abs(self.autodiff - self.finite_difference)

    @property
    def ok(self) -> bool:
        return bool(self.error <= self.allowed)


@dataclass
class Probe:
    index: int
    upstreams: list[np.ndarray]
    directions: dict[int, np.ndarray]
    gradients: dict[int, np.ndarray]
    result: Projection | None = None


# Flat elements [start, stop) of an input: a direction that is zero elsewhere.
Span = tuple[int, int]


@dataclass(frozen=True)
class Slicing:
    """One failing (output, input) block being narrowed down: flat direction and gradient."""

    output: int
    upstream: np.ndarray
    slot_index: int
    direction: np.ndarray
    gradient: np.ndarray


@dataclass
class Counter:
    evaluations: int = 0
    backward_passes: int = 0


@dataclass
class FastChecker:
    """Runs the probes for every differentiable input at once and narrows failures down."""

    ctx: CheckContext
    reason: str
    counter: Counter = field(default_factory=Counter)
    points: dict[int, np.ndarray] = field(default_factory=dict)
    centres: dict[int, np.ndarray] = field(default_factory=dict)
    scales: dict[int, np.ndarray] = field(default_factory=dict)
    findings: Findings = field(default_factory=Findings)

    def _full_mode_bytes(self) -> int:
        shapes = [self.ctx.outputs[k].shape for k in self.ctx.diff_outputs]
        return full_mode_bytes(self.ctx.program, shapes)[0]

    def point(self, slot_index: int) -> np.ndarray:
        """The input's value as float64, read once."""
        if slot_index not in self.points:
            self.points[slot_index] = self.ctx.program.value_of(slot_index)
        return self.points[slot_index]

    def run(self) -> Findings:
        options, findings = self.ctx.options, self.findings
        probes = max(1, options.probes)
        rng = np.random.default_rng((options.seed, FAST_STREAM))
        sources = [i for i, s in enumerate(self.ctx.program.slots) if s.differentiable]
        outputs = self.ctx.diff_outputs
        findings.notes.append(f"fast mode (random projections) was used: {self.reason}")
        self.ctx.program.announce("fast mode: random projections")
        report = options.progress
        failed: list[Probe] = []
        results: list[Probe] = []
        usable = list(sources)
        disconnected: set[int] = set()
        for p in range(probes):
            # Probe 0 uses the resolved upstream: it also checks the VJP the user asked for.
            upstreams = (list(self.ctx.upstreams) if p == 0 else
                         [rng.choice([-1.0, 1.0], size=self.ctx.outputs[k].shape)
                          for k in outputs])
            directions = {i: self._direction(i, rng) for i in usable}
            gradients = self._gradients(outputs, upstreams, usable, disconnected)
            if gradients is None:
                return findings
            usable = [i for i in usable if i in gradients]
            if not usable:
                return findings
            probe = Probe(p, upstreams, {i: directions[i] for i in usable}, gradients)
            probe.result = self.project(outputs, upstreams, probe.directions, gradients)
            results.append(probe)
            if report is not None:
                report("fast mode: random projections", p + 1, probes)
            if not probe.result.ok:  # one failing probe decides; narrowing it down is next
                failed.append(probe)
                break
            probe.upstreams, probe.directions, probe.gradients = [], {}, {}  # input-sized
        self._report(results, failed, outputs, usable, disconnected)
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
                              f"computing the gradient raised {outcomes[0].error_line}",
                              location=outcomes[0].location)
            return None
        result: dict[int, np.ndarray] = {}
        for i, slot, outcome in zip(usable, slots, outcomes):
            if outcome.value is None:
                disconnected.add(i)
                result[i] = np.zeros(slot.shape)
            elif outcome.shape != slot.shape:
                self.findings.add(
                    Kind.GRAD_SHAPE, Status.FAIL,
                    f"the gradient with respect to {slot.name} has shape {outcome.shape}, but"
                    f" {slot.name} has shape {slot.shape}: a gradient (and a custom_gradient"
                    " grad_fn) must return uᵀJ with its input's shape",
                    input=slot.name, details={"gradient_shape": outcome.shape,
                                              "input_shape": slot.shape})
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

    def _along(self, outputs: Sequence[int], upstreams: Sequence[np.ndarray],
               directions: dict[int, np.ndarray], step: float, span: Span | None
               ) -> tuple[float, float]:
        """⟨u, f(x + step*d)⟩ and Σ|u||f| there (the scale of its rounding error)."""
        values = self.evaluate({i: self._moved(i, d, step, span)
                                for i, d in directions.items()}, outputs)
        inner = sum(float(np.vdot(u, v)) for u, v in zip(upstreams, values))
        scale = sum(_abs_inner(u, v) for u, v in zip(upstreams, values))
        return inner, scale

    def step(self) -> float:
        eps = self.ctx.options.eps
        if eps is not None:
            return eps
        return tolerances.machine_eps(self.ctx.program.compute_dtype) ** (1.0 / 3.0)

    def _base_allowance(self, upstreams: Sequence[np.ndarray], directions: dict[int, np.ndarray],
                        gradients: dict[int, np.ndarray], span: Span | None
                        ) -> tuple[float, float]:
        """⟨Jᵀu, d⟩ from autodiff, and what random-sign rounding of J's entries allows there."""
        tolerance = self.ctx.tolerance
        pairs = [(_within(gradients[i], span), _within(d, span)) for i, d in directions.items()]
        autodiff = sum(float(np.vdot(g, d)) for g, d in pairs)
        spread = float(np.sqrt(sum(float(np.sum((g * d) ** 2)) for g, d in pairs)))
        norm_u = float(np.sqrt(sum(float(np.vdot(u, u)) for u in upstreams)))
        norm_d = float(np.sqrt(sum(float(np.vdot(d, d)) for _, d in pairs)))
        return autodiff, PROJECTION_SAFETY * (tolerance.atol * norm_u * norm_d
                                              + tolerance.rtol * spread)

    def _allowed(self, base: float, finite_difference: float, estimate: float) -> float:
        return (base + self.ctx.tolerance.rtol * abs(finite_difference)
                + tolerances.ERROR_ESTIMATE_SAFETY * estimate)

    def project(self, outputs: Sequence[int], upstreams: Sequence[np.ndarray],
                directions: dict[int, np.ndarray], gradients: dict[int, np.ndarray],
                span: Span | None = None) -> Projection:
        """Compare ⟨Jᵀu, d⟩ with central differences along d (only on the span's elements when
        given); x±2t only when x±t is in doubt, and smaller steps when the differences are as
        inconsistent as the discrepancy (a kink crossed by the step)."""
        autodiff, base = self._base_allowance(upstreams, directions, gradients, span)
        t = self.step()
        result = self._differences(outputs, upstreams, directions, span, t,
                                   autodiff, base)
        if result.ok or result.error > KINK_FACTOR * result.inconsistency:
            return result
        for divisor in SMALLER_STEPS:
            smaller = self._differences(outputs, upstreams, directions, span,
                                        t / divisor, autodiff, base)
            if smaller.ok:
                return smaller
        return smaller  # still failing with the kink, if any, no longer crossed

    def _differences(self, outputs: Sequence[int], upstreams: Sequence[np.ndarray],
                     directions: dict[int, np.ndarray],
                     span: Span | None, t: float, autodiff: float, base: float) -> Projection:
        eps = tolerances.machine_eps(self.ctx.tolerance_dtype)
        along = (outputs, upstreams, directions)
        plus1, scale_p1 = self._along(*along, t, span)
        minus1, scale_m1 = self._along(*along, -t, span)
        d1 = (plus1 - minus1) / (2 * t)
        rounding = eps * (scale_p1 + scale_m1) / t
        asymmetry = abs(plus1 - 2 * self._centre(outputs, upstreams) + minus1) / (2 * t)
        first = Projection(autodiff, d1, rounding, self._allowed(base, d1, rounding),
                           asymmetry=asymmetry, rounding=rounding, step=t)
        if first.ok:
            return first
        plus2, scale_p2 = self._along(*along, 2.0 * t, span)
        minus2, scale_m2 = self._along(*along, -2.0 * t, span)
        d2 = (plus2 - minus2) / (4 * t)
        extrapolated = (4 * d1 - d2) / 3
        estimate = abs(d1 - d2) + eps * (scale_p1 + scale_m1 + scale_p2 + scale_m2) / t
        return Projection(autodiff, extrapolated, estimate,
                          self._allowed(base, extrapolated, estimate), extrapolated=True,
                          asymmetry=asymmetry, rounding=rounding, step=t)

    def _centre(self, outputs: Sequence[int], upstreams: Sequence[np.ndarray]) -> float:
        """⟨u, f(x)⟩ from the recorded outputs."""
        for k in outputs:
            if k not in self.centres:
                self.centres[k] = np.asarray(self.ctx.outputs[k].tensor, dtype=np.float64)
        return sum(float(np.vdot(u, self.centres[k])) for u, k in zip(upstreams, outputs))

    def _block_gradient(self, k: int, upstream: np.ndarray, slot_index: int) -> np.ndarray:
        slot = self.ctx.program.slots[slot_index]
        self.counter.backward_passes += 1
        outcome = self.ctx.recording.gradient([k], slot, [upstream])
        if outcome.value is None:
            return np.zeros(slot.shape)
        return outcome.value.reshape(slot.shape)

    def narrow(self, probe: Probe, outputs: Sequence[int]
               ) -> list[tuple[int, int, Projection, list[tuple[int, int]]]]:
        """Failing (output, input) blocks of a failing probe, each with its failing slices."""
        blocks: list[tuple[int, int, Projection, list[tuple[int, int]]]] = []
        single = len(outputs) == 1 and len(probe.directions) == 1
        for position, k in enumerate(outputs):
            upstream = probe.upstreams[position]
            for i, direction in probe.directions.items():
                if single and probe.result is not None:
                    gradient, block = probe.gradients[i], probe.result
                else:
                    gradient = self._block_gradient(k, upstream, i)
                    block = self.project([k], [upstream], {i: direction}, {i: gradient})
                if block.ok:
                    continue
                slices = self._bisect(Slicing(k, upstream, i, direction.reshape(-1),
                                              gradient.reshape(-1)), block)
                blocks.append((k, i, block, slices))
        return blocks

    def _bisect(self, slicing: Slicing, block: Projection) -> list[tuple[int, int]]:
        """Failing element ranges of one block, depth first from the left, down to single
        elements: the left half is measured, and the right half's projection is the parent's
        minus the left's when both were extrapolated (autodiff and finite differences are
        linear in the direction), so a failing pair of halves costs one measurement until the
        right half's turn comes (if it comes: at most MAX_BRANCHES slices are reported); it
        is measured then, before it is split or reported."""
        n = slicing.direction.size
        budget = self.counter.evaluations + min(MAX_NARROWING_EVALUATIONS,
                                                MAX_NARROWING_ELEMENTS // max(n, 1))
        # (start, stop, its projection if known, whether that projection was only deduced)
        pending: list[tuple[int, int, Projection | None, bool]] = [(0, n, block, False)]
        found: list[tuple[int, int]] = []
        while pending and len(found) < MAX_BRANCHES:
            start, stop, known, deduced = pending.pop()
            if deduced and self.counter.evaluations < budget:
                known = self._measure(slicing, (start, stop))
                if known.ok:
                    continue
            if stop - start <= 1 or self.counter.evaluations >= budget:
                found.append((start, stop))
                continue
            middle = (start + stop) // 2
            left = self._measure(slicing, (start, middle))
            right = self._rest(slicing, known, left, (middle, stop))
            if left.ok:  # the parent failed, so the error is in the other half
                pending.append((middle, stop, right, False))
                continue
            if right is None:
                right = self._measure(slicing, (middle, stop))
                if not right.ok:
                    pending.append((middle, stop, right, False))
            elif not right.ok:
                pending.append((middle, stop, right, True))
            pending.append((start, middle, left, False))
        return found

    def _measure(self, slicing: Slicing, span: Span) -> Projection:
        return self.project([slicing.output], [slicing.upstream],
                            {slicing.slot_index: slicing.direction},
                            {slicing.slot_index: slicing.gradient}, span)

    def _rest(self, slicing: Slicing, whole: Projection | None, part: Projection,
              span: Span) -> Projection | None:
        """The projection on `span`, the rest of a measured whole after a measured part (both
        extrapolated from the same step)."""
        if whole is None or not (whole.extrapolated and part.extrapolated
                                 and whole.step == part.step):
            return None
        autodiff, base = self._base_allowance(
            [slicing.upstream], {slicing.slot_index: slicing.direction},
            {slicing.slot_index: slicing.gradient}, span)
        finite_difference = whole.finite_difference - part.finite_difference
        estimate = whole.error_estimate + part.error_estimate
        return Projection(autodiff, finite_difference, estimate,
                          self._allowed(base, finite_difference, estimate), extrapolated=True,
                          step=part.step)

    def _report(self, results: list[Probe], failed: list[Probe], outputs: Sequence[int],
                usable: Sequence[int], disconnected: set[int]) -> None:
        findings = self.findings
        names = [self.ctx.program.slots[i].name for i in usable]
        single_input = names[0] if len(names) == 1 else None
        worst = max(results, key=lambda p: p.result.error / max(p.result.allowed, 1e-300)
                    if p.result else 0.0)
        assert worst.result is not None
        can_miss = (f"{len(results)} random projection(s) ran (seed {self.ctx.options.seed});"
                    f" an error whose effect on ⟨u, J v⟩ stays below the tolerance (here about"
                    f" {worst.result.allowed:.1e}) is missed, so errors in a few small elements"
                    " can go unseen: --mode full checks every element (it needs about"
                    f" {format_size(self._full_mode_bytes())}"
                    " of --max-memory)")
        details: dict[str, Any] = {
            "mode_reason": self.reason, "probes": max(1, self.ctx.options.probes),
            "probes_run": len(results),
            "failed_probes": [p.index for p in failed],
            "evaluations": self.counter.evaluations,
            "backward_passes": self.counter.backward_passes,
        }
        if not failed:
            findings.add(
                Kind.FAST, Status.PASS,
                f"⟨u, J v⟩ from tape.gradient matches central differences along v for every"
                f" probe (largest discrepancy {worst.result.error:.1e}, allowed"
                f" {worst.result.allowed:.1e}); {can_miss}",
                input=single_input, max_abs_err=worst.result.error, details=details)
            for i in disconnected:
                if self.ctx.wants(Kind.CONNECTED):
                    name = self.ctx.program.slots[i].name
                    findings.add(Kind.CONNECTED, Status.PASS,
                                 f"autodiff returns None for {name} and the random projections"
                                 f" agree that the outputs do not depend on {name}", input=name)
            return
        probe = failed[0]
        blocks = self.narrow(probe, outputs)
        details["evaluations"] = self.counter.evaluations
        details["backward_passes"] = self.counter.backward_passes
        planned = details["probes"]
        head = f"probe {probe.index + 1} of {planned} failed" + (
            " (the later ones were not run)" if len(results) < planned else "")
        if not blocks:
            assert probe.result is not None
            findings.add(Kind.FAST, Status.FAIL,
                         f"{head}: ⟨Jᵀu, v⟩ = {probe.result.autodiff:.6g} from tape.gradient,"
                         f" central differences along v give {probe.result.finite_difference:.6g}"
                         f" (allowed {probe.result.allowed:.1e}); no single (output, input) block"
                         f" fails on its own; {can_miss}",
                         input=single_input, max_abs_err=probe.result.error, details=details)
            return
        for k, i, block, slices in blocks:
            self._block_finding(head, k, i, block, slices, details, disconnected, can_miss)

    def _block_finding(self, head: str, k: int, i: int, block: Projection,
                       slices: list[tuple[int, int]], details: dict[str, Any],
                       disconnected: set[int], can_miss: str) -> None:
        slot = self.ctx.program.slots[i]
        output = self.ctx.outputs[k]
        where_text = ", ".join(_fmt_slice(slot.shape, a, b) for a, b in slices)
        first = tuple(int(v) for v in np.unravel_index(slices[0][0], slot.shape)) \
            if slot.shape else ()
        block_details = {**details, "elements": [list(s) for s in slices]}
        where = {"input": slot.name, "output": output.name}
        if i in disconnected and self.ctx.wants(Kind.CONNECTED):
            self.findings.add(
                Kind.CONNECTED, Status.FAIL,
                f"the gradient path from {slot.name} to {output.name} is cut: autodiff returns"
                f" None, but central differences along random directions show {output.name}"
                f" depends on {slot.name} (around {where_text})",
                worst_index=first, details=block_details, **where)
            return
        self.findings.add(
            Kind.FAST, Status.FAIL,
            f"{head}: for {output.name} and {slot.name}, ⟨Jᵀu, v⟩ from tape.gradient is"
            f" {block.autodiff:.6g} but central differences along v give"
            f" {block.finite_difference:.6g} (allowed {block.allowed:.1e}); the gradient is wrong"
            f" around {slot.name}{where_text}; {can_miss}",
            worst_index=first, max_abs_err=block.error, details=block_details, **where)


# Input-sized arrays are reduced this many elements at a time, without input-sized temporaries.
CHUNK = 1 << 20


def _abs_inner(a: np.ndarray, b: np.ndarray) -> float:
    """Σ|aᵢ||bᵢ|."""
    a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
    return float(sum(np.dot(np.abs(a[i:i + CHUNK]), np.abs(b[i:i + CHUNK]))
                     for i in range(0, a.size, CHUNK)))


def _within(array: np.ndarray, span: Span | None) -> np.ndarray:
    return array if span is None else array.reshape(-1)[span[0]:span[1]]


def _fmt_slice(shape: tuple[int, ...], start: int, stop: int) -> str:
    def index(flat: int) -> str:
        return format_index(tuple(int(v) for v in np.unravel_index(flat, shape)))

    if stop - start == 1:
        return index(start)
    return f"{index(start)}..{index(stop - 1)} ({stop - start} elements)"


def run_fast(ctx: CheckContext, reason: str) -> Findings:
    """The fast-mode findings (and notes)."""
    return FastChecker(ctx, reason).run()

