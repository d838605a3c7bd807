"""Run the gradient checks on a bound function and build the report (no I/O)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcheck import autodiff, numerics
from gradcheck.autodiff import GradientOutcome, OutputLeaf, Recording, Slot
from gradcheck.errors import InputError
from gradcheck.inputs import NamedArgument, resolve_upstreams
from gradcheck.locations import exception_location
from gradcheck.numerics import Comparison, FiniteDifference, Tolerance
from gradcheck.report import CheckResult, Report, TensorInfo

ALL_KINDS = frozenset(
    {"jacobian", "vjp", "grad-shape", "connected", "custom-gradient", "upstream", "kink"}
)
COMMAND_KINDS = {
    "jacobian": frozenset({"jacobian", "grad-shape", "connected", "custom-gradient", "kink"}),
    "vjp": frozenset({"vjp", "grad-shape", "connected", "custom-gradient", "upstream", "kink"}),
    "check": ALL_KINDS,
}
# Blocks up to this many elements carry their matrices in the report details.
SHOWN_BLOCK_SIZE = 64
DEFAULT_MAX_MEMORY = 1 << 30


@dataclass(frozen=True)
class CheckOptions:
    upstream: tuple[Any, ...] = ()
    atol: float | None = None
    rtol: float | None = None
    eps: float | None = None
    mode: str = "auto"
    probes: int = 8
    seed: int = 0
    dtype: str = "auto"
    max_memory: int = DEFAULT_MAX_MEMORY
    kinds: frozenset[str] = ALL_KINDS


@dataclass
class Findings:
    """Results as they are found, turned into a Report at the end."""

    results: list[CheckResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, check: str, status: str, message: str, **fields: Any) -> None:
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


def _matrix(block: np.ndarray | None) -> list[Any] | None:
    if block is None or block.size > SHOWN_BLOCK_SIZE:
        return None
    return np.asarray(block).tolist()


def _comparison_fields(comparison: Comparison) -> dict[str, Any]:
    return {
        "max_abs_err": comparison.max_abs_err,
        "max_rel_err": comparison.max_rel_err,
        "worst_index": comparison.worst_index,
    }


def _fmt_index(index: tuple[int, ...] | None) -> str:
    return "" if index is None else "[" + ", ".join(str(i) for i in index) + "]"


def _describe_outcome_shape(outcome: GradientOutcome) -> str:
    return str(outcome.shape)


def _grad_shape_message(output: OutputLeaf, slot: Slot, outcome: GradientOutcome) -> str:
    return (
        f"the gradient of {output.name} with respect to {slot.name} has shape {outcome.shape},"
        f" but {slot.name} has shape {slot.shape}: a gradient (and a custom_gradient grad_fn)"
        f" must return uᵀJ with its input's shape, e.g."
        f" tf.linalg.matvec(J, upstream, transpose_a=True), not J * upstream"
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
        h = numerics.step_sizes(x, self.program.compute_dtype, self.options.eps)
        evaluations = evaluator.evaluate_perturbations(h)
        fd = {
            k: numerics.finite_difference(values, centre, h, self.outputs[k].dtype)
            for k, values, centre in zip(self.diff_outputs, evaluations, centres)
        }
        if evaluator.fallback_reason and evaluator.strategy == "loop":
            self.findings.notes.append(
                f"finite differences for {slot.name} evaluated f point by point"
                f" ({evaluator.fallback_reason})"
            )
        return SourceAnalysis(slot, fd, {}, strategy=evaluator.strategy)

    def check_block(self, analysis: SourceAnalysis, k: int, position: int) -> None:
        """grad-shape, connected, jacobian and kink for one (output, input) block."""
        slot, output = analysis.slot, self.outputs[k]
        outcome = self.recording.gradient([k], slot, [self.upstreams[position]])
        fd = analysis.fd[k]
        where = {"input": slot.name, "output": output.name}
        if outcome.error is not None:
            analysis.shape_ok = False
            self.findings.add(
                "custom-gradient", "fail",
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
                self.findings.add("grad-shape", "fail", _grad_shape_message(output, slot, outcome),
                                  details={"gradient_shape": outcome.shape,
                                           "input_shape": slot.shape}, **where)
            return
        if self.wants("connected"):
            self.findings.add("connected", "pass",
                              f"{output.name} is connected to {slot.name}", **where)
        block, error = self.recording.jacobian(k, slot)
        analysis.autodiff[k] = block
        if block is None:
            self.findings.add("jacobian", "error",
                              f"tape.jacobian failed: {error}" if error else
                              "tape.jacobian returned None although tape.gradient did not",
                              **where)
            return
        analysis.kink_masks[k] = self._judge_jacobian(block, fd, output, slot)

    def reference(self, analysis: SourceAnalysis, k: int) -> np.ndarray:
        """The FD Jacobian, with autodiff standing in at kinks (where FD cannot judge)."""
        fd = analysis.fd[k].jacobian
        block, mask = analysis.autodiff.get(k), analysis.kink_masks.get(k)
        if block is None or mask is None or not mask.any():
            return fd
        return np.where(mask, block, fd)

    def _check_disconnected(self, analysis: SourceAnalysis, k: int, output: OutputLeaf) -> None:
        slot, fd = analysis.slot, analysis.fd[k]
        where = {"input": slot.name, "output": output.name}
        if not self.wants("connected"):
            return
        if numerics.is_negligible(fd.jacobian, fd.error_estimate, self.tolerance):
            self.findings.add(
                "connected", "pass",
                f"autodiff returns None for d{output.name}/d{slot.name} and finite differences"
                f" agree that {output.name} does not depend on {slot.name}", **where)
            return
        magnitude = float(np.max(np.abs(fd.jacobian)))
        detached = "" if output.origin == "tensor" else (
            f"; {output.name} is a {output.origin} value, computed outside TensorFlow")
        self.findings.add(
            "connected", "fail",
            f"the gradient path from {slot.name} to {output.name} is cut: autodiff returns None,"
            f" but finite differences show {output.name} depends on {slot.name} (|dy/dx| up to"
            f" {magnitude:.3g}){detached}",
            details={"finite_difference": _matrix(fd.jacobian)}, **where)

    def _judge_jacobian(self, block: np.ndarray, fd: FiniteDifference, output: OutputLeaf,
                        slot: Slot) -> np.ndarray:
        """Judge one block; return the mask of elements at kinks (excluded from the verdict)."""
        where = {"input": slot.name, "output": output.name}
        plain = numerics.compare(block, fd.jacobian, self.tolerance, fd.error_estimate)
        kinks = fd.kink & ~np.isclose(block, fd.jacobian, rtol=self.tolerance.rtol,
                                      atol=self.tolerance.atol)
        comparison = plain
        if plain.ok:
            kinks = np.zeros_like(kinks)
        if not plain.ok and np.any(kinks):
            comparison = numerics.compare(block, fd.jacobian, self.tolerance, fd.error_estimate,
                                          ignore=fd.kink)
            if self.wants("kink"):
                index = tuple(int(i) for i in np.argwhere(kinks)[0])
                self.findings.add(
                    "kink", "warn",
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
        if comparison.ok:
            message = (f"autodiff matches finite differences (max rel err"
                       f" {comparison.max_rel_err:.1e}, tolerance rtol={self.tolerance.rtol:g})")
            self.findings.add("jacobian", "pass", message, details=details,
                              **_comparison_fields(comparison), **where)
            return kinks
        index = comparison.worst_index or ()
        self.findings.add(
            "jacobian", "fail",
            f"autodiff and finite differences disagree in {comparison.n_bad} of"
            f" {comparison.size} elements; worst {_fmt_index(index)}: autodiff"
            f" {block[index]:.6g}, finite differences {fd.jacobian[index]:.6g}",
            details=details, **_comparison_fields(comparison), **where)
        return kinks

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
            self.findings.add("vjp", "skip", f"no VJP for {slot.name}: its gradient is broken"
                              " (see the checks above)", **where)
            return
        expected = sum(
            (numerics.contract(u, self.reference(analysis, k))
             for u, k in zip(self.upstreams, self.diff_outputs)),
            start=np.zeros(slot.shape),
        )
        estimate = sum(
            (numerics.contract(np.abs(u), analysis.fd[k].error_estimate)
             for u, k in zip(self.upstreams, self.diff_outputs)),
            start=np.zeros(slot.shape),
        )
        actual = np.zeros(slot.shape) if outcome.value is None else outcome.value
        comparison = numerics.compare(actual, expected, self.tolerance, estimate)
        details = {"vjp": _matrix(actual), "finite_difference": _matrix(expected)}
        if comparison.ok:
            self.findings.add("vjp", "pass",
                              f"tape.gradient(..., output_gradients=u) matches uᵀJ from finite"
                              f" differences (max rel err {comparison.max_rel_err:.1e})",
                              details=details, **_comparison_fields(comparison), **where)
            return
        index = comparison.worst_index or ()
        self.findings.add(
            "vjp", "fail",
            f"tape.gradient(..., output_gradients=u) differs from uᵀJ (finite differences) in"
            f" {comparison.n_bad} of {comparison.size} elements; worst {_fmt_index(index)}:"
            f" {np.asarray(actual)[index]:.6g} vs {np.asarray(expected)[index]:.6g}",
            details=details, **_comparison_fields(comparison), **where)

    def check_upstreams(self, specs: Sequence[Any]) -> None:
        if not self.wants("upstream"):
            return
        for u, k in zip(self.upstreams, self.diff_outputs):
            if u.size > 1 and np.all(u == 1.0):
                self.findings.add(
                    "upstream", "warn",
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
    usable = [i for i, o in enumerate(outputs) if o.differentiable]
    if not usable:
        reasons = "; ".join(f"{o.name} {o.reason}" for o in outputs)
        raise InputError(f"{name} returns no floating-point tensor to differentiate: {reasons}")
    return usable


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
    program, _ = autodiff.prepare(function, named, options.dtype)
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
    tolerance = numerics.tolerance_for(tolerance_dtype, options.atol, options.rtol)
    checker = Checker(recording, options, tolerance, tolerance_dtype, upstreams, diff_outputs)
    checker.findings.notes.extend(program.notes)
    checker.findings.notes.extend(s.note for s in program.slots if s.note)
    checker.findings.notes.extend(
        f"output {o.name} {o.reason}: not checked"
        for o in recording.outputs
        if not o.differentiable
    )
    for index, slot in enumerate(program.slots):
        if not slot.differentiable:
            continue
        analysis = checker.analyse(index)
        for position, k in enumerate(diff_outputs):
            checker.check_block(analysis, k, position)
        checker.check_vjp(analysis)
    checker.check_upstreams(options.upstream)
    inputs, outputs = _tensor_infos(recording)
    return Report(
        target=target_label,
        inputs=inputs,
        outputs=outputs,
        checks=tuple(checker.findings.results),
        notes=tuple(checker.findings.notes),
    )
