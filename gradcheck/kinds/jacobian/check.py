"""The jacobian check of one (output, input) block against full mode's finite differences,
and what the block says beside it: grad-shape, connected, kink."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from gradcheck.checks.context import CheckContext, Findings, shown
from gradcheck.engine.program import OutputLeaf, Slot
from gradcheck.evidence import Location
from gradcheck.evidence.causes import Kinked
from gradcheck.evidence.connected import Connected, GradShape
from gradcheck.evidence.gradients import (
    CutPath,
    GradientRaised,
    Independent,
    Jump,
    Kink,
    KinkSite,
    UntrainedWeight,
)
from gradcheck.evidence.notes import Note
from gradcheck.forensics.culprits import OpSite, crossed_kink_site, jump_site, kink_site
from gradcheck.forensics.gaps import loops_inside
from gradcheck.forensics.gradient_faults import tensorflow_gradient_fault
from gradcheck.kinds.jacobian.evidence import (
    ConjugateGradient,
    JacobianInconclusive,
    JacobianMatch,
    JacobianMismatch,
    JacobianSymmetric,
    TapeJacobianFailed,
)
from gradcheck.kinds.jacobian.full import SourceAnalysis
from gradcheck.kinds.jacobian.kinks import with_crossed_kinks
from gradcheck.kinds.jacobian.verdicts import (
    comparison_fields,
    disagreement,
    mismatch,
    symmetric_warning,
)
from gradcheck.numerics import differences, float32, judging, symmetric
from gradcheck.numerics.differences import FiniteDifference
from gradcheck.numerics.mistakes import value_mistake
from gradcheck.numerics.tolerances import ERROR_ESTIMATE_SAFETY, Tolerance
from gradcheck.report import Block, Cause, CheckResult, Kind, Mistake, Status

# The op at a kink of one block element (its index, the output's rank), when it can be found.
KinkSiteFinder = Callable[[tuple[int, ...], int], OpSite | None]

_DTYPE_MIX = ("expected to be a float tensor but is a double tensor",
              "expected to be a double tensor but is a float tensor")


def _dtype_mix_cause(error: str, location: Location | None) -> Cause | None:
    if not any(text in error for text in _DTYPE_MIX):
        return None
    return Cause(Mistake.DTYPE_MIX, location=location)


@dataclass(frozen=True)
class JudgedBlock:
    """What the jacobian check learnt of one (output, input) block, for the checks after it."""

    autodiff: np.ndarray | None = None  # tape.jacobian's block (None: no gradient, or none made)
    kinks: np.ndarray | None = None  # where f has a kink: finite differences decide nothing
    shape_ok: bool = True


@dataclass(frozen=True)
class JudgedInput:
    """One input's finite differences and what the jacobian check judged of each block."""

    analysis: SourceAnalysis
    blocks: Mapping[int, JudgedBlock]

    @property
    def slot(self) -> Slot:
        return self.analysis.slot

    @property
    def shape_ok(self) -> bool:
        """Whether every block's gradient had the input's shape (and was computed at all)."""
        return all(block.shape_ok for block in self.blocks.values())

    def autodiff(self, k: int) -> np.ndarray | None:
        return self.blocks[k].autodiff if k in self.blocks else None

    def reference(self, k: int) -> np.ndarray:
        """The FD Jacobian, with autodiff standing in at kinks (where FD cannot judge)."""
        fd = self.analysis.fd[k].jacobian
        block, mask = self.autodiff(k), self.blocks[k].kinks if k in self.blocks else None
        if block is None or mask is None or not mask.any():
            return fd
        return np.where(mask & np.isfinite(block), block, fd)


def judge_input(ctx: CheckContext, analysis: SourceAnalysis) -> tuple[Findings, JudgedInput]:
    """Every block of one input (each output in turn), and what was judged of them."""
    found, blocks = Findings(), {}
    for position, k in enumerate(ctx.diff_outputs):
        judged, blocks[k] = check_block(ctx, analysis, k, position)
        found.extend(judged)
    return found, JudgedInput(analysis, blocks)


def check_block(ctx: CheckContext, analysis: SourceAnalysis, k: int, position: int
                ) -> tuple[Findings, JudgedBlock]:
    """grad-shape, connected, jacobian and kink for one (output, input) block."""
    found = Findings()
    slot, output = analysis.slot, ctx.outputs[k]
    outcome = ctx.recording.gradient([k], slot, [ctx.upstreams[position]])
    where = {"input": slot.name, "output": output.name}
    if outcome.error is not None:
        cause = _dtype_mix_cause(outcome.error_line, outcome.location)
        fault = None if cause else tensorflow_gradient_fault(ctx.program, outcome.error)
        found.add(Kind.CUSTOM_GRADIENT, Status.FAIL,
                  evidence=GradientRaised(outcome.error_line, cause is not None,
                                          fault.op if fault else None),
                  location=fault.location if fault and fault.location else outcome.location,
                  cause=cause, **where)
        return found, JudgedBlock(shape_ok=False)
    if outcome.value is None:
        return _disconnected(ctx, analysis, k, position), JudgedBlock()
    if outcome.shape != slot.shape:
        if ctx.wants(Kind.GRAD_SHAPE):
            found.add(Kind.GRAD_SHAPE, Status.FAIL, evidence=GradShape(
                outcome.shape, slot.shape, output.name, slot.name), **where)
        return found, JudgedBlock(shape_ok=False)
    if ctx.wants(Kind.CONNECTED):
        found.add(Kind.CONNECTED, Status.PASS, evidence=Connected(
            output.name, slot.name, outcome.indexed_slices), **where)
    block, error = ctx.recording.jacobian(k, slot, ctx.options.max_memory)
    if block is None:
        found.add(Kind.JACOBIAN, Status.ERROR, evidence=TapeJacobianFailed(error or None),
                  **where)
        return found, JudgedBlock()
    if loops_inside(ctx.program) and (failed := ctx.recording.pfor_failure(k, slot)):
        found.notes.append(failed)  # the user's own tape.jacobian would fail: say so
    _settle_doubts(ctx, analysis, k, block)
    if analysis.precise:
        analysis.widen_rounding(k, judging.in_doubt(block, analysis.fd[k], ctx.fd_tolerance,
                                                     int(np.prod(slot.shape))))
    fd = analysis.fd[k]
    plain = judging.compare(block, fd.jacobian, ctx.fd_tolerance, fd.error_estimate)
    if not plain.ok:  # crossed kinks only mark elements, so `plain` stands
        analysis.fd[k] = with_crossed_kinks(ctx, fd, analysis.evaluator.slot_index,
                                            analysis.steps, bool(analysis.precise), k, block)
    kinks, judged = judge_jacobian(ctx, block, analysis.fd[k], plain, output, slot,
                                   analysis.probe, functools.partial(_kink_site, ctx, analysis, k))
    found.extend(judged)
    if ctx.settings.keep_blocks:
        fd, tolerance = analysis.fd[k], ctx.fd_tolerance
        allowed = (tolerance.atol + tolerance.rtol * np.abs(fd.jacobian)
                   + tolerance.scale_rtol * judging.block_scale(fd.jacobian, block)
                   + ERROR_ESTIMATE_SAFETY * fd.error_estimate)
        found.blocks.append(Block(output.name, slot.name, block, fd.jacobian, fd.error_estimate,
                                  np.where(kinks, np.nan, allowed), ctx.upstreams[position]))
    return found, JudgedBlock(block, kinks)


def _settle_doubts(ctx: CheckContext, analysis: SourceAnalysis, k: int,
                   block: np.ndarray) -> None:
    """Richardson where plain differences disagree, then smaller steps for what still does."""
    size, tolerance = int(np.prod(analysis.slot.shape)), ctx.fd_tolerance
    doubt = judging.in_doubt(block, analysis.fd[k], tolerance, size)
    analysis.refine(ctx, doubt)
    # Only the columns refined or retried change, so only they are judged again (noisiness
    # is judged over all columns once).
    noisy = judging.noisy_columns(analysis.fd[k], tolerance, size)
    divisors = float32.SMALLER_STEPS if analysis.precise else differences.SMALLER_STEPS
    for divisor in (*divisors, None):
        doubt = np.union1d(judging.in_doubt(block, analysis.fd[k], tolerance, size, doubt),
                           noisy)
        if doubt.size == 0:
            return
        analysis.retry_smaller(ctx, doubt, divisor if divisor is not None
                               else differences.relative_divisor(analysis.slot.value.numpy()))
        noisy = judging.noisy_columns(analysis.fd[k], tolerance, size, doubt)


def _disconnected(ctx: CheckContext, analysis: SourceAnalysis, k: int,
                  position: int) -> Findings:
    found = Findings()
    slot, output = analysis.slot, ctx.outputs[k]
    where = {"input": slot.name, "output": output.name}
    if not ctx.wants(Kind.CONNECTED):
        return found
    exact_zero = Tolerance(atol=ctx.tolerance.atol, rtol=0.0)
    fd = analysis.fd[k]
    analysis.refine(ctx, judging.in_doubt(np.zeros_like(fd.jacobian), fd, exact_zero,
                                          int(np.prod(slot.shape))))
    fd = analysis.fd[k]
    if ctx.settings.keep_blocks:  # autodiff None: a cut path, drawn as an empty block
        found.blocks.append(Block(output.name, slot.name, None, fd.jacobian, fd.error_estimate,
                                  ctx.tolerance.atol + ERROR_ESTIMATE_SAFETY
                                  * fd.error_estimate, ctx.upstreams[position]))
    if judging.is_negligible(fd.jacobian, fd.error_estimate, ctx.tolerance):
        if not slot.argument:  # a trainable weight with no gradient: it never trains
            found.add(Kind.CONNECTED, Status.WARN, evidence=UntrainedWeight(
                never_read=slot.name in ctx.recording.unread_weights), **where)
            return found
        found.add(Kind.CONNECTED, Status.PASS, evidence=Independent(), **where)
        return found
    found.add(Kind.CONNECTED, Status.FAIL, evidence=CutPath(
        shown(fd.jacobian), _slope(ctx, fd), None if output.origin == "tensor"
        else output.origin), **where)
    return found


def _slope(ctx: CheckContext, fd: FiniteDifference) -> float:
    """The largest slope finite differences see where they are finite; NaN when only their
    non-finite elements (f NaN or infinite around the point) suggest a dependence."""
    finite = np.isfinite(fd.jacobian)
    slopes = np.where(finite, fd.jacobian, 0.0)
    if not finite.all() and judging.is_negligible(
            slopes, np.where(finite, fd.error_estimate, 0.0), ctx.tolerance):
        return float("nan")
    return float(np.max(np.abs(slopes), initial=0.0))


def _kinks(ctx: CheckContext, block: np.ndarray, fd: FiniteDifference,
           plain: judging.Comparison) -> np.ndarray:
    """Elements at a kink that explain a failure (none when the block passes anyway, but for
    jumps of f itself, whose differences also make a passing block inconclusive)."""
    marked = fd.kink if not plain.ok else fd.jump if fd.jump is not None else None
    if marked is None or not np.any(marked):
        return np.zeros(block.shape, dtype=bool)
    # A NaN or inf from autodiff is a finding even at a kink.
    return marked & np.isfinite(block) & ~np.isclose(
        block, fd.jacobian, rtol=ctx.fd_tolerance.rtol, atol=ctx.fd_tolerance.atol)


def _kink_site(ctx: CheckContext, analysis: SourceAnalysis, k: int, index: tuple[int, ...],
               rank: int) -> OpSite | None:
    """The op whose kink sits at this block element of output `k`: of the ops that output is
    computed from, the one f's input lies on, else the one the element's own steps carry
    across (a kink too shallow to show at the point itself)."""
    slot, output = analysis.slot, ctx.outputs[k].name
    site = kink_site(ctx.program, ctx.diff_outputs, (index[rank:], slot.shape), output)
    if site is not None:
        return site
    element = int(np.ravel_multi_index(index[rank:], slot.shape)) if slot.shape else 0
    factors = float32.FACTORS if analysis.precise else differences.STEP_FACTORS
    reach = max(factors) * float(analysis.steps.reshape(-1)[element])
    return crossed_kink_site(ctx.program, ctx.diff_outputs, analysis.evaluator.slot_index,
                             element, reach, output)


def _kink(ctx: CheckContext, block: np.ndarray, fd: FiniteDifference, kinks: np.ndarray,
          output: OutputLeaf, slot: Slot, site_of: KinkSiteFinder) -> CheckResult:
    """The warning that f has a kink here, at the op that has it when found."""
    index = tuple(int(i) for i in np.argwhere(kinks)[0])
    if fd.jump is not None and np.any(kinks & fd.jump):
        # f jumps at some of these elements: the jump is the finding (the others' kinks are
        # its edges, as the real part of a complex sqrt along its cut).
        return _jump(ctx, block, fd, kinks & fd.jump, output, slot)
    site = site_of(index, len(output.shape))
    return CheckResult(
        Kind.KINK, Status.WARN, evidence=Kink(
            int(np.sum(kinks)), index, float(block[index]), float(fd.jacobian[index]),
            KinkSite(site.name, site.tie, site.location) if site else None,
            weight=slot.is_variable, output_rank=len(output.shape)),
        worst_index=index, location=site.location if site else None,
        cause=Cause(Mistake.KINK, site.name, site.location, Kinked(site.name, site.tie))
        if site else None,
        input=slot.name, output=output.name)


def _jump(ctx: CheckContext, block: np.ndarray, fd: FiniteDifference, jumps: np.ndarray,
          output: OutputLeaf, slot: Slot) -> CheckResult:
    """The warning that f itself jumps here, at the op whose branch cut or wrap it is."""
    index = tuple(int(i) for i in np.argwhere(jumps)[0])
    site = jump_site(ctx.program, ctx.diff_outputs)
    return CheckResult(
        Kind.KINK, Status.WARN, evidence=Jump(
            int(np.sum(jumps)), index, float(block[index]), float(fd.jacobian[index]),
            KinkSite(site.name, site.tie, site.location) if site else None,
            output_rank=len(output.shape)),
        worst_index=index, location=site.location if site else None,
        input=slot.name, output=output.name)


def _conjugate_note(block: np.ndarray, output: OutputLeaf, slot: Slot,
                    tolerance: Tolerance) -> list[Note]:
    """The note that TensorFlow's gradient is conj(f'(z))·upstream, when the complex block
    (its parts on a last axis of output and input) satisfies Cauchy–Riemann: f holomorphic."""
    parts = block.reshape(-1, 2, int(np.prod(slot.shape[:-1])), 2)
    real, imag = parts[:, 0, :, 0], parts[:, 1, :, 0]
    scale = float(np.max(np.abs(parts), initial=0.0))
    if scale == 0.0 or not (
            np.allclose(parts[:, 1, :, 1], real, rtol=0.0, atol=tolerance.atol + 1e-6 * scale)
            and np.allclose(parts[:, 0, :, 1], -imag, rtol=0.0,
                            atol=tolerance.atol + 1e-6 * scale)):
        return []
    derivative = real + 1j * imag
    worst = complex(derivative.reshape(-1)[int(np.argmax(np.abs(derivative)))])
    return [ConjugateGradient(output.name, slot.name, worst, worst.conjugate())]


def judge_jacobian(ctx: CheckContext, block: np.ndarray, fd: FiniteDifference,
                   plain: judging.Comparison, output: OutputLeaf, slot: Slot,
                   probe: symmetric.SymmetricProbe | None, site_of: KinkSiteFinder
                   ) -> tuple[np.ndarray, Findings]:
    """Judge one block, given its `plain` comparison with fd (kinks not excluded); return the
    mask of elements at kinks (excluded from the verdict)."""
    found = Findings()
    where = {"input": slot.name, "output": output.name}
    tolerance = ctx.fd_tolerance
    kinks = _kinks(ctx, block, fd, plain)
    comparison = plain
    if np.any(kinks):
        comparison = judging.compare(block, fd.jacobian, tolerance, fd.error_estimate,
                                     ignore=fd.kink)
        if ctx.wants(Kind.KINK):
            found.results.append(_kink(ctx, block, fd, kinks, output, slot, site_of))
    matrices = (shown(block), shown(fd.jacobian), list(block.shape),
                float(np.max(fd.error_estimate, initial=0.0)), tolerance.atol, tolerance.rtol)
    if comparison.ok and judging.inconclusive(fd, tolerance) and not judging.compare(
            block, fd.jacobian, tolerance, ignore=fd.kink if np.any(kinks) else None).ok:
        found.add(Kind.JACOBIAN, Status.WARN, evidence=JacobianInconclusive(
            *matrices, largest=float(np.max(np.abs(fd.jacobian), initial=0.0))),
                  **comparison_fields(comparison), **where)
        return kinks, found
    if comparison.ok:
        found.add(Kind.JACOBIAN, Status.PASS, evidence=JacobianMatch(*matrices),
                  **comparison_fields(comparison), **where)
        if slot.complex_dtype is not None and output.complex_dtype is not None:
            found.notes += _conjugate_note(block, output, slot, tolerance)
        return kinks, found
    verdict = probe.judge_jacobian(output.name, block, tolerance) if probe else None
    warning = symmetric_warning(
        Kind.JACOBIAN, lambda numbers, size: JacobianSymmetric(*matrices, numbers, size),
        comparison, verdict, where)
    if warning is not None:
        found.results.append(warning)
        return kinks, found
    mistake = value_mistake(block, fd.jacobian, int(np.prod(output.shape)),
                            len(ctx.diff_outputs), output.name, max(1e-6, ctx.tolerance.rtol),
                            complex_input=slot.complex_dtype is not None,
                            complex_output=output.complex_dtype is not None)
    found.results.append(mismatch(
        Kind.JACOBIAN, JacobianMismatch(
            *matrices, disagreement(block, fd.jacobian, comparison, verdict)),
        comparison, where, mistake))
    return kinks, found
