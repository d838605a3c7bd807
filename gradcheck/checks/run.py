"""Run the gradient checks on a bound function and build the report (no I/O)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcheck.checks import explain, fast
from gradcheck.checks import jvp as forward
from gradcheck.errors import InputError
from gradcheck.load.inputs import NamedArgument, resolve_upstreams
from gradcheck.load.locations import exception_location
from gradcheck.numerics import differences, judging, symmetric, tolerances
from gradcheck.numerics.differences import FiniteDifference
from gradcheck.numerics.judging import Comparison
from gradcheck.numerics.tolerances import Tolerance
from gradcheck.options import CheckOptions
from gradcheck.report import CheckResult, Kind, Report, Status, TensorInfo
from gradcheck.tf import program as autodiff
from gradcheck.tf.program import BatchEvaluator, GradientOutcome, OutputLeaf, Recording, Slot

# Blocks up to this many elements carry their matrices in the report details.
SHOWN_BLOCK_SIZE = 64


@dataclass
class Findings:
    """Results as they are found, turned into a Report at the end."""

    results: list[CheckResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, check: Kind, status: Status, message: str, **fields: Any) -> None:
        self.results.append(CheckResult(check=check, status=status, message=message, **fields))


@dataclass
class SourceAnalysis:
    """Everything known about one differentiable input after the numerics ran."""

    slot: Slot
    fd: dict[int, FiniteDifference]
    autodiff: dict[int, np.ndarray | None]
    vjp: GradientOutcome | None = None
    shape_ok: bool = True
    # Per output: where f has a kink, finite differences decide nothing; autodiff stands in.
    kink_masks: dict[int, np.ndarray] = field(default_factory=dict)
    strategy: str = "vectorised"
    # Central differences come first (x±h); x±2h is evaluated only where a verdict needs it.
    evaluator: BatchEvaluator | None = None
    steps: np.ndarray | None = None
    first: dict[int, np.ndarray] = field(default_factory=dict)
    centres: dict[int, np.ndarray] = field(default_factory=dict)
    refined: np.ndarray | None = None


def _matrix(block: np.ndarray | None) -> list[Any] | None:
    if block is None or block.size > SHOWN_BLOCK_SIZE:
        return None
    return np.asarray(block).tolist()


def _comparison_fields(comparison: Comparison) -> dict[str, Any]:
    return {
        "max_abs_err": comparison.max_abs_err,
        "max_rel_err": comparison.max_rel_err,
        "worst_index": comparison.worst_index,
        "excess": comparison.excess,
    }


def _fmt_index(index: tuple[int, ...] | None) -> str:
    return "" if index is None else "[" + ", ".join(str(i) for i in index) + "]"


def _describe_outcome_shape(outcome: GradientOutcome) -> str:
    return str(outcome.shape)


def _grad_shape_message(output: OutputLeaf, slot: Slot, outcome: GradientOutcome) -> str:
    return (
        f"the gradient of {output.name} with respect to {slot.name} has shape {outcome.shape},"
        f" but {slot.name} has shape {slot.shape}: a gradient must have its source's shape; a"
        f" tf.custom_gradient grad_fn must return uᵀJ with its input's shape, e.g."
        f" tf.linalg.matvec(J, upstream, transpose_a=True)"
    )


class Checker:
    """Computes autodiff and finite-difference quantities and judges them."""

    def __init__(self, recording: Recording, options: CheckOptions, tolerance: Tolerance,
                 tolerance_dtype: str, upstreams: Sequence[np.ndarray],
                 diff_outputs: Sequence[int]) -> None:
        self.recording = recording
        self.program = recording.program
        self.options = options
        self.tolerance = tolerance
        self.tolerance_dtype = tolerance_dtype
        self.upstreams = list(upstreams)
        self.diff_outputs = list(diff_outputs)
        self.findings = Findings()
        self.symmetric: dict[str, symmetric.SymmetricProbe] = {}

    @property
    def outputs(self) -> list[OutputLeaf]:
        return self.recording.outputs

    def wants(self, kind: str) -> bool:
        return kind in self.options.kinds

    def analyse(self, slot_index: int) -> SourceAnalysis:
        slot = self.program.slots[slot_index]
        centres = [np.asarray(self.outputs[k].tensor, dtype=np.float64) for k in self.diff_outputs]
        evaluator = autodiff.BatchEvaluator(
            self.program, slot_index, self.diff_outputs, centres, self.options.max_memory
        )
        x = np.asarray(slot.value.numpy(), dtype=np.float64)
        h = differences.step_sizes(x, self.program.compute_dtype, self.options.eps)
        evaluations = evaluator.evaluate_perturbations(
            h, differences.FIRST_FACTORS,
            progress=self._progress(f"finite differences for {slot.name}"))
        fd = {
            k: differences.central_difference(values, centre, h, self.outputs[k].dtype)
            for k, values, centre in zip(self.diff_outputs, evaluations, centres)
        }
        if symmetric.is_square_matrix(slot.shape):
            self.symmetric[slot.name] = symmetric.SymmetricProbe(
                evaluator.evaluate, x, h,
                [(self.outputs[k].name, c, self.outputs[k].dtype)
                 for k, c in zip(self.diff_outputs, centres)],
                evaluator.chunk_size())
        if evaluator.fallback_reason and evaluator.strategy == "loop":
            self.findings.notes.append(
                f"finite differences for {slot.name} evaluated f point by point"
                f" ({evaluator.fallback_reason})"
            )
        return SourceAnalysis(slot, fd, {}, strategy=evaluator.strategy, evaluator=evaluator,
                              steps=h, first=dict(zip(self.diff_outputs, evaluations)),
                              centres=dict(zip(self.diff_outputs, centres)),
                              refined=np.zeros(h.size, dtype=bool))

    def _progress(self, task: str) -> Callable[[int, int], None] | None:
        report = self.options.progress
        if report is None:
            return None
        return lambda done, total: report(task, done, total)

    def refine(self, analysis: SourceAnalysis, elements: np.ndarray) -> None:
        """Add x±2h for these flat input elements: Richardson values, error estimates, kinks."""
        if analysis.evaluator is None or analysis.refined is None or analysis.steps is None:
            return
        todo = np.asarray(elements, dtype=np.int64)
        todo = todo[~analysis.refined[todo]]
        if todo.size == 0:
            return
        second = analysis.evaluator.evaluate_perturbations(
            analysis.steps, differences.SECOND_FACTORS, elements=todo)
        for k, values in zip(self.diff_outputs, second):
            analysis.fd[k] = differences.refine(
                analysis.fd[k], analysis.first[k], values, analysis.centres[k], analysis.steps,
                todo, self.outputs[k].dtype)
        analysis.refined[todo] = True

    def check_block(self, analysis: SourceAnalysis, k: int, position: int) -> None:
        """grad-shape, connected, jacobian and kink for one (output, input) block."""
        slot, output = analysis.slot, self.outputs[k]
        outcome = self.recording.gradient([k], slot, [self.upstreams[position]])
        fd = analysis.fd[k]
        where = {"input": slot.name, "output": output.name}
        if outcome.error is not None:
            analysis.shape_ok = False
            self.findings.add(
                Kind.CUSTOM_GRADIENT, Status.FAIL,
                f"computing the gradient of {output.name} with respect to {slot.name} raised"
                f" {autodiff.first_line(outcome.error)}",
                location=exception_location(outcome.error), **where,
            )
            return
        if outcome.value is None:
            analysis.autodiff[k] = None
            self._check_disconnected(analysis, k, output)
            return
        if outcome.shape != slot.shape:
            analysis.shape_ok = False
            if self.wants("grad-shape"):
                self.findings.add(Kind.GRAD_SHAPE, Status.FAIL,
                                  _grad_shape_message(output, slot, outcome),
                                  details={"gradient_shape": outcome.shape,
                                           "input_shape": slot.shape}, **where)
            return
        if self.wants("connected"):
            sparse = (" (tape.gradient returned IndexedSlices, densified for the checks)"
                      if outcome.indexed_slices else "")
            self.findings.add(Kind.CONNECTED, Status.PASS,
                              f"{output.name} is connected to {slot.name}{sparse}", **where)
        block, error = self.recording.jacobian(k, slot, self.options.max_memory)
        analysis.autodiff[k] = block
        if block is None:
            self.findings.add(Kind.JACOBIAN, Status.ERROR,
                              f"tape.jacobian failed: {error}" if error else
                              "tape.jacobian returned None although tape.gradient did not",
                              **where)
            return
        size = int(np.prod(slot.shape))
        self.refine(analysis, judging.in_doubt(block, fd, self.tolerance, size))
        for divisor in (*differences.SMALLER_STEPS, None):
            doubt = np.union1d(
                judging.in_doubt(block, analysis.fd[k], self.tolerance, size),
                judging.noisy_columns(analysis.fd[k], self.tolerance, size))
            if doubt.size == 0:
                break
            self.retry_smaller(analysis, doubt, divisor if divisor is not None
                               else differences.relative_divisor(slot.value.numpy()))
        analysis.kink_masks[k] = self._judge_jacobian(block, analysis.fd[k], output, slot)

    def retry_smaller(self, analysis: SourceAnalysis, elements: np.ndarray,
                      divisor: float | np.ndarray) -> None:
        """Columns still in doubt, again with steps `divisor` times smaller."""
        if analysis.evaluator is None or analysis.steps is None:
            return
        small = analysis.steps / divisor
        first = analysis.evaluator.evaluate_perturbations(
            small, differences.FIRST_FACTORS, elements=elements)
        second = analysis.evaluator.evaluate_perturbations(
            small, differences.SECOND_FACTORS, elements=elements)
        for k, ones, twos in zip(self.diff_outputs, first, second):
            analysis.fd[k] = differences.with_smaller_steps(
                analysis.fd[k], ones, twos, analysis.centres[k], small, elements,
                self.outputs[k].dtype)

    def reference(self, analysis: SourceAnalysis, k: int) -> np.ndarray:
        """The FD Jacobian, with autodiff standing in at kinks (where FD cannot judge)."""
        fd = analysis.fd[k].jacobian
        block, mask = analysis.autodiff.get(k), analysis.kink_masks.get(k)
        if block is None or mask is None or not mask.any():
            return fd
        return np.where(mask & np.isfinite(block), block, fd)

    def _check_disconnected(self, analysis: SourceAnalysis, k: int, output: OutputLeaf) -> None:
        slot, fd = analysis.slot, analysis.fd[k]
        where = {"input": slot.name, "output": output.name}
        if not self.wants("connected"):
            return
        exact_zero = Tolerance(atol=self.tolerance.atol, rtol=0.0)
        self.refine(analysis, judging.in_doubt(np.zeros_like(fd.jacobian), fd, exact_zero,
                                                int(np.prod(slot.shape))))
        fd = analysis.fd[k]
        if judging.is_negligible(fd.jacobian, fd.error_estimate, self.tolerance):
            self.findings.add(
                Kind.CONNECTED, Status.PASS,
                f"autodiff returns None for d{output.name}/d{slot.name} and finite differences"
                f" agree that {output.name} does not depend on {slot.name}", **where)
            return
        magnitude = float(np.max(np.abs(fd.jacobian)))
        detached = "" if output.origin == "tensor" else (
            f"; {output.name} is a {output.origin} value, computed outside TensorFlow")
        self.findings.add(
            Kind.CONNECTED, Status.FAIL,
            f"the gradient path from {slot.name} to {output.name} is cut: autodiff returns None,"
            f" but finite differences show {output.name} depends on {slot.name} (|dy/dx| up to"
            f" {magnitude:.3g}){detached}",
            details={"finite_difference": _matrix(fd.jacobian)}, **where)

    def _judge_jacobian(self, block: np.ndarray, fd: FiniteDifference, output: OutputLeaf,
                        slot: Slot) -> np.ndarray:
        """Judge one block; return the mask of elements at kinks (excluded from the verdict)."""
        where = {"input": slot.name, "output": output.name}
        plain = judging.compare(block, fd.jacobian, self.tolerance, fd.error_estimate)
        # A NaN or inf from autodiff is a finding even at a kink.
        kinks = fd.kink & np.isfinite(block) & ~np.isclose(
            block, fd.jacobian, rtol=self.tolerance.rtol, atol=self.tolerance.atol)
        comparison = plain
        if plain.ok:
            kinks = np.zeros_like(kinks)
        if not plain.ok and np.any(kinks):
            comparison = judging.compare(block, fd.jacobian, self.tolerance, fd.error_estimate,
                                          ignore=fd.kink)
            if self.wants("kink"):
                index = tuple(int(i) for i in np.argwhere(kinks)[0])
                self.findings.add(
                    Kind.KINK, Status.WARN,
                    f"{output.name} is not differentiable in {slot.name} at this point"
                    f" ({int(np.sum(kinks))} element(s), e.g. {_fmt_index(index)}): autodiff"
                    f" gives {block[index]:.6g}, finite differences across the kink"
                    f" {fd.jacobian[index]:.6g}; move the point away from the kink",
                    worst_index=index, **where)
        details = {
            "autodiff": _matrix(block),
            "finite_difference": _matrix(fd.jacobian),
            "shape": list(block.shape),
            "fd_error_estimate": float(np.max(fd.error_estimate, initial=0.0)),
            "atol": self.tolerance.atol, "rtol": self.tolerance.rtol,
        }
        if comparison.ok and not judging.compare(block, fd.jacobian, self.tolerance).ok \
                and judging.inconclusive(fd, self.tolerance):
            self.findings.add(
                Kind.JACOBIAN, Status.WARN,
                f"inconclusive: finite differences are too noisy here to confirm autodiff"
                f" (their error estimate reaches {details['fd_error_estimate']:.2g} against"
                f" |J| up to {float(np.max(np.abs(fd.jacobian), initial=0.0)):.2g}; autodiff"
                f" differs by up to {comparison.max_abs_err:.2g}); check f's precision"
                f" (--dtype) or the step (--eps)",
                details=details, **_comparison_fields(comparison), **where)
            return kinks
        if comparison.ok:
            message = (f"autodiff matches finite differences (max abs err"
                       f" {comparison.max_abs_err:.1e}, {comparison.max_rel_err:.1e} of max |J|;"
                       f" the worst element uses {comparison.excess:.2g} of its allowed error"
                       f" atol={self.tolerance.atol:g} + rtol={self.tolerance.rtol:g}·|J| + the"
                       f" finite-difference error estimate)")
            self.findings.add(Kind.JACOBIAN, Status.PASS, message, details=details,
                              **_comparison_fields(comparison), **where)
            return kinks
        probe = self.symmetric.get(slot.name)
        verdict = probe.judge_jacobian(output.name, block, self.tolerance) if probe else None
        if self._symmetric_warning(Kind.JACOBIAN, f"tape.jacobian of {output.name}", slot,
                                   comparison, verdict, details, where):
            return kinks
        self._mismatch(Kind.JACOBIAN, "autodiff and finite differences disagree",
                       ("autodiff", block), ("finite differences", fd.jacobian),
                       comparison, verdict, details, where)
        return kinks

    def _mismatch(self, check: Kind, lead: str, actual: tuple[str, np.ndarray],
                  expected: tuple[str, np.ndarray], comparison: Comparison,
                  verdict: symmetric.SymmetricVerdict | None, details: dict[str, Any],
                  where: dict[str, Any]) -> None:
        """A failure naming how many elements disagree and the worst one."""
        index = comparison.worst_index or ()
        self.findings.add(
            check, Status.FAIL,
            f"{lead} in {comparison.n_bad} of {comparison.size} elements; worst"
            f" {_fmt_index(index)}: {actual[0]} {np.asarray(actual[1])[index]:.6g},"
            f" {expected[0]} {np.asarray(expected[1])[index]:.6g}"
            f" ({comparison.excess:.3g}× the allowed error)"
            + (symmetric.mismatch_note(verdict) if verdict else ""),
            details=details, **_comparison_fields(comparison), **where)

    def _symmetric_warning(self, check: Kind, what: str, slot: Slot, elementwise: Comparison,
                           verdict: symmetric.SymmetricVerdict | None, details: dict[str, Any],
                           where: dict[str, Any]) -> bool:
        """A failure that is TensorFlow's symmetric-matrix convention becomes a warning."""
        if verdict is None or not verdict.convention:
            return False
        found = verdict.comparison
        details = {**details, "symmetric_perturbations": {
            "directions": verdict.directions.count, "max_abs_err": found.max_abs_err,
            "max_rel_err": found.max_rel_err, "elementwise_max_abs_err": elementwise.max_abs_err,
            "elementwise_max_rel_err": elementwise.max_rel_err,
            "elementwise_mismatches": elementwise.n_bad}}
        self.findings.add(check, Status.WARN,
                          symmetric.convention_message(what, slot.name, elementwise, verdict),
                          details=details, max_abs_err=found.max_abs_err,
                          max_rel_err=found.max_rel_err, excess=found.excess,
                          worst_index=verdict.worst_index, **where)
        return True

    def check_vjp(self, analysis: SourceAnalysis) -> None:
        """tape.gradient(ys, x, output_gradients=us) against Σₖ uₖᵀJₖ from finite differences."""
        slot = analysis.slot
        outcome = self.recording.gradient(self.diff_outputs, slot, self.upstreams)
        analysis.vjp = outcome
        where = {"input": slot.name, "output": None if len(self.diff_outputs) > 1
                 else self.outputs[self.diff_outputs[0]].name}
        if not self.wants("vjp"):
            return
        if outcome.error is not None or not analysis.shape_ok:
            self.findings.add(Kind.VJP, Status.SKIP,
                              f"no VJP for {slot.name}: its gradient is broken"
                              " (see the checks above)", **where)
            return
        actual = np.zeros(slot.shape) if outcome.value is None else outcome.value
        expected, estimate = self._fd_vjp(analysis)
        comparison = judging.compare(actual, expected, self.tolerance, estimate)
        if not comparison.ok and analysis.refined is not None and not analysis.refined.all():
            # Same argument as judging.in_doubt: only failing elements can change verdict.
            failing = ~(np.abs(actual - expected) <= self.tolerance.atol + self.tolerance.rtol
                        * np.abs(expected) + tolerances.ERROR_ESTIMATE_SAFETY * estimate)
            self.refine(analysis, np.flatnonzero(failing))
            expected, estimate = self._fd_vjp(analysis)
            comparison = judging.compare(actual, expected, self.tolerance, estimate)
        details = {"vjp": _matrix(actual), "finite_difference": _matrix(expected)}
        if comparison.ok:
            self.findings.add(Kind.VJP, Status.PASS,
                              f"tape.gradient(..., output_gradients=u) matches uᵀJ from finite"
                              f" differences (max abs err {comparison.max_abs_err:.1e},"
                              f" {comparison.max_rel_err:.1e} of max |uᵀJ|, {comparison.excess:.2g}"
                              f" of the allowed error)",
                              details=details, **_comparison_fields(comparison), **where)
            return
        probe = self.symmetric.get(slot.name)
        verdict = probe.judge_vjp(actual, self.upstreams, self.tolerance) if probe else None
        if self._symmetric_warning(Kind.VJP, "tape.gradient(..., output_gradients=u)", slot,
                                   comparison, verdict, details, where):
            return
        self._mismatch(Kind.VJP, "tape.gradient(..., output_gradients=u) differs from uᵀJ (finite"
                       " differences)", ("tape.gradient", actual), ("uᵀJ", expected),
                       comparison, verdict, details, where)

    def _fd_vjp(self, analysis: SourceAnalysis) -> tuple[np.ndarray, np.ndarray]:
        """Σₖ uₖᵀJₖ from finite differences, and its error estimate."""
        shape = analysis.slot.shape
        expected = sum(
            (judging.contract(u, self.reference(analysis, k))
             for u, k in zip(self.upstreams, self.diff_outputs)),
            start=np.zeros(shape),
        )
        estimate = sum(
            (judging.contract(np.abs(u), analysis.fd[k].error_estimate)
             for u, k in zip(self.upstreams, self.diff_outputs)),
            start=np.zeros(shape),
        )
        return expected, estimate

    def explanation(self, analyses: Sequence[SourceAnalysis]) -> dict[str, Any]:
        """What tape.gradient returns for each input, with and without output_gradients."""
        facts = []
        for analysis in analyses:
            slot = analysis.slot
            targets = []
            for u, k in zip(self.upstreams, self.diff_outputs):
                plain = self.recording.gradient([k], slot, None)
                vjp = self.recording.gradient([k], slot, [u])
                block = analysis.autodiff.get(k)
                source = "autodiff" if block is not None else (
                    "none" if plain.value is None and plain.error is None else "finite differences")
                if source == "finite differences":
                    block = self.reference(analysis, k)
                error = plain.error or vjp.error
                targets.append(explain.TargetFacts(
                    self.outputs[k].name, self.outputs[k].shape, u, block, source, plain.value,
                    vjp.value, self.reference(analysis, k),
                    autodiff.first_line(error) if error else None))
            plain = self.recording.gradient(self.diff_outputs, slot, None)
            vjp = analysis.vjp or self.recording.gradient(self.diff_outputs, slot, self.upstreams)
            error = plain.error or vjp.error
            symmetric_vjp = any(r.check == Kind.VJP and r.status == Status.WARN
                                and r.input == slot.name
                                and "symmetric_perturbations" in r.details
                                for r in self.findings.results)
            facts.append(explain.InputFacts(
                slot.name, slot.shape, tuple(targets), plain.value, vjp.value,
                autodiff.first_line(error) if error else None, symmetric_vjp))
        return explain.explain(facts)

    def check_upstreams(self, specs: Sequence[Any]) -> None:
        if not self.wants("upstream"):
            return
        for u, k in zip(self.upstreams, self.diff_outputs):
            if u.size > 1 and np.all(u == 1.0):
                self.findings.add(
                    Kind.UPSTREAM, Status.WARN,
                    f"the upstream for {self.outputs[k].name} is all ones: uᵀJ is then the column"
                    " sums of J, which hides transposed or mixed-up rows; a random upstream"
                    " (the default) catches them", output=self.outputs[k].name)


def _tensor_infos(recording: Recording) -> tuple[tuple[TensorInfo, ...], tuple[TensorInfo, ...]]:
    inputs = tuple(TensorInfo(s.name, s.shape, s.dtype, s.differentiable)
                   for s in recording.program.slots)
    outputs = tuple(
        TensorInfo(o.name, o.shape if o.tensor is not None else (), o.dtype if o.tensor is not None
                   else "none", o.differentiable)
        for o in recording.outputs
    )
    return inputs, outputs


def _validate_outputs(recording: Recording, name: str) -> list[int]:
    outputs = recording.outputs
    if len(outputs) == 1 and outputs[0].origin == "none":
        raise InputError(f"{name} returned None; it must return a tensor, a tuple/list or a dict"
                         " of tensors (a missing return statement?)")
    if not outputs:
        raise InputError(f"{name} returned an empty tuple, list or dict; it must return at least"
                         " one floating-point tensor")
    usable = [i for i, o in enumerate(outputs) if o.differentiable]
    if not usable:
        reasons = "; ".join(f"{o.name} {o.reason}" for o in outputs)
        raise InputError(f"{name} returns no floating-point tensor to differentiate: {reasons}")
    return usable


def _output_change(then: OutputLeaf, now: OutputLeaf) -> tuple[str, float | None,
                                                                tuple[int, ...] | None] | None:
    """How one output differs between two calls (beyond rounding), or None."""
    if then.tensor is None or then.shape != now.shape:
        return f"{now.name} changed from shape {then.shape} to {now.shape}", None, None
    a = np.asarray(then.tensor, dtype=np.float64)
    b = np.asarray(now.tensor, dtype=np.float64)
    gap = np.abs(a - b)
    allowed = 8 * tolerances.machine_eps(now.dtype) * (np.abs(b) + np.max(np.abs(b), initial=0.0))
    bad = ~(gap <= allowed)  # NaN on one call only counts as a change
    if not np.any(bad):
        return None
    ranked = np.where(bad, np.nan_to_num(gap, nan=np.inf), -1.0)
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(ranked)), b.shape)) or None
    largest = float(ranked[index] if index else ranked)
    at = f" at {_fmt_index(index)}" if index else ""
    return f"{now.name} differs by up to {largest:.3g}{at}", largest, index


def _changed_between_calls(first: Any, recording: Recording, diff_outputs: Sequence[int],
                           name: str) -> CheckResult | None:
    """A `nondeterminism` failure when two calls with the same inputs disagree."""
    before = autodiff.flatten_outputs(first, autodiff.output_base(recording.program))
    if [o.name for o in before] != [o.name for o in recording.outputs]:
        output, (what, largest, index) = None, ("its outputs changed structure", None, None)
    else:
        changes = [(recording.outputs[k].name, change) for k in diff_outputs
                   if (change := _output_change(before[k], recording.outputs[k])) is not None]
        if not changes:
            return None
        output, (what, largest, index) = changes[0]
    return CheckResult(
        Kind.NONDETERMINISM, Status.FAIL,
        f"{name} returned different values on two calls with the same inputs: {what}; random"
        " ops (tf.random.*, dropout) or state that changes between calls make finite"
        " differences meaningless, so no gradient verdict is given: fix the randomness"
        " (tf.random.stateless_*) or check a deterministic version",
        output=output, max_abs_err=largest, worst_index=index)


def _lowest_precision(dtypes: Sequence[str]) -> str:
    for candidate in ("bfloat16", "float16", "float32"):
        if candidate in dtypes:
            return candidate
    return "float64"


def run_checks(
    function: Callable[..., Any],
    named: Sequence[NamedArgument],
    options: CheckOptions,
    target_label: str,
) -> Report:
    """Evaluate f, compare autodiff with finite differences, and report every finding."""
    return check_program(function, named, options, target_label)[0]


def check_program(
    function: Callable[..., Any],
    named: Sequence[NamedArgument],
    options: CheckOptions,
    target_label: str,
) -> tuple[Report, autodiff.Program]:
    """run_checks, also returning f bound to its arguments (for diagnosis to reuse)."""
    if options.phase is not None:
        options.phase(f"the first calls of {autodiff.function_name(function)} and its gradient")
    program, first_result = autodiff.prepare(function, named, options.dtype)
    program.vectorise, program.phase = options.vectorise, options.phase
    program.announce(f"{autodiff.function_name(function)} under a GradientTape")
    recording = autodiff.record(program)
    name = autodiff.function_name(function)
    diff_outputs = _validate_outputs(recording, name)
    upstreams = resolve_upstreams(
        options.upstream,
        [(recording.outputs[k].name, recording.outputs[k].shape) for k in diff_outputs],
        options.seed,
    )
    tolerance_dtype = _lowest_precision(
        [program.compute_dtype] + [recording.outputs[k].dtype for k in diff_outputs])
    tolerance = tolerances.tolerance_for(tolerance_dtype, options.atol, options.rtol)
    checker = Checker(recording, options, tolerance, tolerance_dtype, upstreams, diff_outputs)
    if tolerance_dtype != program.compute_dtype:
        # f returns lower precision than its inputs (a Keras layer, a tf.cast inside):
        # steps sized for the inputs' dtype would drown in the outputs' rounding.
        program.notes.append(
            f"{name} returns {tolerance_dtype} outputs for {program.compute_dtype} inputs:"
            f" finite-difference steps and tolerances are {tolerance_dtype}'s")
        program.compute_dtype = tolerance_dtype
    checker.findings.notes.extend(program.notes)
    checker.findings.notes.extend(s.note for s in program.slots if s.note)
    checker.findings.notes.extend(
        f"output {o.name} {o.reason}: not checked"
        for o in recording.outputs
        if not o.differentiable
    )
    changed = _changed_between_calls(first_result, recording, diff_outputs, name)
    if changed is not None:
        checker.findings.results.append(changed)
    analyses: list[SourceAnalysis] = []
    choice = fast.choose_mode(options, program,
                              [recording.outputs[k].shape for k in diff_outputs],
                              recording.call_seconds)
    if choice.mode == "fast" and changed is None:
        fast.run_fast(checker, choice.reason)
    for index, slot in enumerate(program.slots):
        if not slot.differentiable or changed is not None or choice.mode == "fast":
            continue
        analysis = checker.analyse(index)
        for position, k in enumerate(diff_outputs):
            checker.check_block(analysis, k, position)
        checker.check_vjp(analysis)
        analyses.append(analysis)
    if checker.wants("jvp") and changed is None:
        forward.check_jvp(checker)
    checker.check_upstreams(options.upstream)
    checker.findings.notes.extend(recording.workarounds)
    inputs, outputs = _tensor_infos(recording)
    return Report(
        target=target_label,
        inputs=inputs,
        outputs=outputs,
        checks=tuple(checker.findings.results),
        notes=tuple(checker.findings.notes),
        explain=checker.explanation(analyses) if options.explain and analyses else None,
    ), program
