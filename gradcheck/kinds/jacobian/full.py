"""Full mode's finite differences: per input, f at x ± h (and x ± 2h) for every element,
with their error estimate and the kinks the steps cross; check.py judges each
block against them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gradcheck.checks.context import CheckContext
from gradcheck.engine.batch import BatchEvaluator
from gradcheck.engine.program import Slot
from gradcheck.evidence.notes import Note
from gradcheck.numerics import differences, float32, symmetric
from gradcheck.numerics.differences import FiniteDifference


@dataclass
class SourceAnalysis:
    """Everything known about one differentiable input after the numerics ran."""

    slot: Slot
    evaluator: BatchEvaluator
    steps: np.ndarray
    fd: dict[int, FiniteDifference]
    # Central differences come first (x±h); x±2h is evaluated only where a verdict needs it.
    first: dict[int, np.ndarray]
    centres: dict[int, np.ndarray]
    refined: np.ndarray
    probe: symmetric.SymmetricProbe | None = None
    # Per output, where f computes in float32: x and f's measured noise (numerics/float32.py).
    precise: dict[int, float32.Float32Steps] = field(default_factory=dict)

    def refine(self, ctx: CheckContext, elements: np.ndarray) -> None:
        """Add x±2h for these flat input elements: Richardson values, error estimates, kinks."""
        todo = np.asarray(elements, dtype=np.int64)
        todo = todo[~self.refined[todo]]
        if todo.size == 0:
            return
        second = self.evaluator.evaluate_perturbations(
            self.steps, differences.SECOND_FACTORS, elements=todo)
        for k, values in zip(ctx.diff_outputs, second):
            self.fd[k] = differences.refine(self.fd[k], self.first[k], values, self.centres[k],
                                            self.steps, todo, ctx.outputs[k].dtype)
        self.refined[todo] = True

    def widen_rounding(self, k: int, elements: np.ndarray) -> None:
        """Where f computes in float32: the listed columns' error estimates with f's noise as
        the default steps' own seven values show it, where that is larger (up to
        NOISE_UNDERSTATEMENT times the noise measured next to x) and the columns still hold
        those steps' differences (not a retry's)."""
        if not self.precise or elements.size == 0:
            return
        steps, n = self.precise[k], self.steps.size
        values = np.asarray(self.first[k], dtype=np.float64).reshape(
            (n, len(float32.FACTORS), -1))[elements]
        # At most NOISE_UNDERSTATEMENT times the noise next to x: the seven values also leave
        # a kink or a jump unexplained, which must stay a finding.
        measured = steps.noise[None, :]
        noise = np.clip(float32.step_noise(values, self.centres[k], steps.x, self.steps,
                                           elements),
                        measured, differences.NOISE_UNDERSTATEMENT * measured)
        columns = float32.richardson(values, self.centres[k], steps, self.steps, elements, noise)
        held = np.asarray(self.fd[k].jacobian).reshape(-1, n)[:, elements].T
        self.fd[k] = differences.replaced_where(self.fd[k], columns, elements,
                                                np.all(held == columns[0], axis=1), n)

    def retry_smaller(self, ctx: CheckContext, elements: np.ndarray,
                      divisor: float | np.ndarray) -> None:
        """Columns still in doubt, again with steps `divisor` times smaller."""
        small = self.steps / divisor
        if self.precise:
            values = self.evaluator.evaluate_perturbations(small, float32.FACTORS, elements)
            for k, evaluations in zip(ctx.diff_outputs, values):
                self.fd[k] = differences.keep_better(self.fd[k], *float32.columns(
                    evaluations, self.centres[k], small, self.precise[k], elements),
                    elements, small.size)
            return
        first = self.evaluator.evaluate_perturbations(
            small, differences.FIRST_FACTORS, elements=elements)
        second = self.evaluator.evaluate_perturbations(
            small, differences.SECOND_FACTORS, elements=elements)
        for k, ones, twos in zip(ctx.diff_outputs, first, second):
            self.fd[k] = differences.with_smaller_steps(
                self.fd[k], ones, twos, self.centres[k], small, elements, ctx.outputs[k].dtype)


def analyse(ctx: CheckContext, slot_index: int) -> tuple[SourceAnalysis, list[Note]]:
    """Central differences x±h along every element of one input (and notes on how)."""
    slot = ctx.program.slots[slot_index]
    centres = [np.asarray(ctx.outputs[k].tensor, dtype=np.float64) for k in ctx.diff_outputs]
    evaluator = BatchEvaluator(ctx.program, slot_index, ctx.diff_outputs, centres,
                               ctx.options.max_memory)
    x = ctx.program.value_of(slot_index)
    if float32.applies(ctx.program.compute_dtype):
        return _analyse_float32(ctx, slot_index, evaluator, centres)
    h = differences.step_sizes(x, ctx.program.compute_dtype, ctx.options.eps)
    evaluations = evaluator.evaluate_perturbations(
        h, differences.FIRST_FACTORS,
        progress=ctx.settings.task_progress(f"finite differences for {slot.name}"))
    fd = {k: differences.central_difference(values, centre, h, ctx.outputs[k].dtype)
          for k, values, centre in zip(ctx.diff_outputs, evaluations, centres)}
    return _analysis(ctx, slot_index, evaluator, h, fd, evaluations, centres)


def _analyse_float32(ctx: CheckContext, slot_index: int, evaluator: BatchEvaluator,
                     centres: list[np.ndarray]) -> tuple[SourceAnalysis, list[Note]]:
    """Where f computes in float32: f's noise measured, then x ± h, ± 2h, ± 4h at once."""
    slot, x = ctx.program.slots[slot_index], ctx.program.value_of(slot_index)
    h = float32.step_sizes(x, ctx.options.eps)
    noise = evaluator.evaluate(float32.noise_points(x, ctx.options.seed))
    precise = {k: float32.Float32Steps(x, float32.noise_level(values, centre))
               for k, values, centre in zip(ctx.diff_outputs, noise, centres)}
    evaluations = evaluator.evaluate_perturbations(
        h, float32.FACTORS,
        progress=ctx.settings.task_progress(f"finite differences for {slot.name}"))
    fd = {k: float32.finite_difference(values, centre, h, precise[k])
          for k, values, centre in zip(ctx.diff_outputs, evaluations, centres)}
    analysis, notes = _analysis(ctx, slot_index, evaluator, h, fd, evaluations, centres)
    analysis.precise = precise
    analysis.refined[:] = True
    return analysis, notes


def _analysis(ctx: CheckContext, slot_index: int, evaluator: BatchEvaluator, h: np.ndarray,
              fd: dict[int, FiniteDifference], evaluations: list[np.ndarray],
              centres: list[np.ndarray]) -> tuple[SourceAnalysis, list[Note]]:
    slot, x = ctx.program.slots[slot_index], ctx.program.value_of(slot_index)
    probe = None
    if symmetric.is_square_matrix(slot.shape):
        probe = symmetric.SymmetricProbe(
            evaluator.evaluate, x, h,
            [(ctx.outputs[k].name, c, ctx.outputs[k].dtype)
             for k, c in zip(ctx.diff_outputs, centres)],
            evaluator.chunk_size())
    notes: list[Note] = []
    if evaluator.fallback_reason and evaluator.strategy == "loop" and slot.argument:
        notes.append(evaluator.fallback_reason)
    return SourceAnalysis(slot, evaluator, h, fd, dict(zip(ctx.diff_outputs, evaluations)),
                          dict(zip(ctx.diff_outputs, centres)),
                          np.zeros(h.size, dtype=bool), probe=probe), notes


