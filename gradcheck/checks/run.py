"""Run every check on f bound to its arguments and assemble the report (no I/O)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from gradcheck.check_settings import CheckSettings
from gradcheck.checks.context import CheckContext, Findings
from gradcheck.checks.explain import explanation
from gradcheck.checks.upstream import check_upstreams
from gradcheck.checks.weights import unbuilt_layer_results, variable_in_call_results
from gradcheck.engine.binding import Prepared, prepare
from gradcheck.engine.program import (
    Evaluation,
    Origin,
    Program,
    flatten_outputs,
    function_name,
)
from gradcheck.engine.recording import GradientOutcome, Recording, record
from gradcheck.errors import InputError
from gradcheck.evidence.notes import (
    ComputesInside,
    Note,
    OutputNotChecked,
    ReturnsLower,
    RoundsToFloat32,
)
from gradcheck.forensics.gaps import lowest_precision_inside
from gradcheck.kinds.jacobian.check import JudgedInput, judge_input
from gradcheck.kinds.jacobian.fast import check_fast
from gradcheck.kinds.jacobian.full import analyse
from gradcheck.kinds.jacobian.mode import Mode, choose_mode
from gradcheck.kinds.nondeterminism.check import backward_changed, changed_between_calls
from gradcheck.kinds.registry import check_registered, validate_registered
from gradcheck.kinds.vjp.check import check_vjp
from gradcheck.load.inputs import resolve_upstreams
from gradcheck.numerics.rounding import (
    PROBE_STEPS,
    ROUNDING_PROBE_SEED,
    TINY_MOVE,
    is_first_order,
    is_second_order,
    probe_direction,
    tiny_move_resolved,
)
from gradcheck.numerics.tolerances import tolerance_for
from gradcheck.options import SWEPT_KINDS, CheckOptions
from gradcheck.report import CheckResult, Kind, Report, TensorInfo
from gradcheck.targets.named import NamedArgument


def _tensor_infos(recording: Recording) -> tuple[tuple[TensorInfo, ...], tuple[TensorInfo, ...]]:
    # Plain strings, not the engine's enums: a report is unpickled in the parent process.
    inputs = tuple(TensorInfo(s.name, s.user_shape, s.user_dtype, s.differentiable,
                              s.kind.value)
                   for s in recording.program.slots)
    outputs = tuple(
        TensorInfo(o.name, o.shape[:-1] if o.complex_dtype else o.shape,
                   o.complex_dtype or o.dtype, o.differentiable) if o.tensor is not None
        else TensorInfo(o.name, (), "none", o.differentiable)
        for o in recording.outputs)
    return inputs, outputs


def _validate_outputs(recording: Recording, name: str) -> list[int]:
    outputs = recording.outputs
    if len(outputs) == 1 and outputs[0].origin is Origin.NONE:
        raise InputError(f"{name} returned None; it must return a tensor, a tuple/list or a dict"
                         " of tensors (a missing return statement?)")
    if not outputs:
        raise InputError(f"{name} returned an empty tuple, list or dict; it must return at least"
                         " one floating-point tensor")
    usable = [i for i, o in enumerate(outputs) if o.differentiable]
    empty = [o for o in outputs if o.differentiable and 0 in tuple(o.shape)]
    if empty:
        raise InputError(f"{name} returned an empty tensor: {empty[0].name} has shape"
                         f" {tuple(empty[0].shape)}; every output needs at least one element")
    if not usable:
        reasons = "; ".join(f"{o.name} {o.reason}" for o in outputs)
        message = f"{name} returns no floating-point tensor to differentiate: {reasons}"
        if any(_integer_tensor(o.tensor) for o in outputs):
            raise IntegerOutputs(message, recording)
        raise InputError(message)
    return usable


def _integer_tensor(tensor: Any) -> bool:
    dtype = getattr(tensor, "dtype", None)
    return bool(getattr(dtype, "is_integer", False) or getattr(dtype, "is_bool", False))


class IntegerOutputs(InputError):
    """f returns only integer or boolean tensors (the ranks of tf.argsort, an argmax): no
    gradient to check, but diagnosis can still say which op on the way gives none."""

    def __init__(self, message: str, recording: Recording) -> None:
        super().__init__(message)
        self.recording = recording

    def __reduce__(self) -> Any:  # sent to the parent process as the plain input error
        return (InputError, (self.message,))

    def report(self, target_label: str, checks: Sequence[CheckResult]) -> Report:
        inputs, outputs = _tensor_infos(self.recording)
        return Report(target=target_label, inputs=inputs, outputs=outputs, checks=tuple(checks))


def _lowest_precision(dtypes: Sequence[str]) -> str:
    for candidate in ("bfloat16", "float16", "float32"):
        if candidate in dtypes:
            return candidate
    return "float64"


def _rounds_to_float32(recording: Recording, diff_outputs: Sequence[int]) -> str | None:
    """The float64 argument that f rounds to float32 inside (a float32 Keras Input layer, a
    tf.cast): moved far less than float32 can resolve, no output changes at all, though a
    float64 f would have moved (else f does not depend on it here, an argument only a grad_fn
    reads, a relu that is off; or f is stationary along the move)."""
    program = recording.program
    rng = np.random.default_rng(ROUNDING_PROBE_SEED)
    for index, slot in enumerate(program.slots):
        if not (slot.differentiable and slot.argument) or slot.dtype != "float64":
            continue
        x = program.value_of(index)
        direction = probe_direction(rng, x)
        change = _change(recording, diff_outputs, index, x + TINY_MOVE * direction)
        if change is None:
            return None  # f raising off its point is found (and reported) by the checks
        if change == 0.0 and _would_have_moved(recording, diff_outputs, index, x, direction):
            return slot.name
    return None


def _would_have_moved(recording: Recording, diff_outputs: Sequence[int], index: int,
                      x: np.ndarray, direction: np.ndarray) -> bool:
    """Whether moves that float32 resolves say a float64 f would have changed under the tiny
    move (gradcheck.numerics.rounding)."""
    one, two = (_change(recording, diff_outputs, index, x + step * direction)
                for step in PROBE_STEPS)
    if not one or not two or not np.isfinite(one) or not np.isfinite(two):
        return False  # f does not depend on the argument here (or not finitely)
    ratio = two / one
    if is_first_order(ratio):
        return tiny_move_resolved(one, max(
            float(np.max(np.abs(np.asarray(recording.outputs[k].tensor, dtype=np.float64)),
                         initial=0.0)) for k in diff_outputs))
    return not is_second_order(ratio)


def _change(recording: Recording, diff_outputs: Sequence[int], index: int,
            value: np.ndarray) -> float | None:
    """How far f's differentiable outputs move (the largest absolute change; 0.0: bit for
    bit the same) with argument `index` at `value` (None: f raised there)."""
    try:
        moved = flatten_outputs(recording.program.call_at({index: value}))
    except (Exception, SystemExit):
        return None
    if all(np.array_equal(np.asarray(moved[k].tensor), np.asarray(recording.outputs[k].tensor))
           for k in diff_outputs):
        return 0.0
    largest = 0.0
    for k in diff_outputs:
        now = np.asarray(moved[k].tensor, dtype=np.float64)
        then = np.asarray(recording.outputs[k].tensor, dtype=np.float64)
        if now.shape != then.shape:
            return float("inf")
        with np.errstate(invalid="ignore", over="ignore"):
            gap = np.abs(now - then)
        largest = max(largest, float(np.max(gap, where=np.isfinite(gap), initial=0.0)))
    return largest or float("inf")  # a change only where values are not finite


def _sizing_dtype(recording: Recording, diff_outputs: Sequence[int]) -> tuple[str, Note | None]:
    """The dtype finite-difference steps and tolerances are sized for (the lowest precision
    involved), and a note when that is not the arguments' dtype."""
    program = recording.program
    name = function_name(program.function)
    computed = program.compute_dtype
    dtype = _lowest_precision([computed] + [recording.outputs[k].dtype for k in diff_outputs])
    inside = lowest_precision_inside(program) if dtype not in ("float16", "bfloat16") else None
    if inside is not None:
        # Half precision inside, float32 outputs (the mixed-precision recipe): its rounding
        # decides what finite differences can see and how far autodiff may be off.
        return inside, ComputesInside(name, inside, recording.outputs[diff_outputs[0]].dtype)
    if dtype != computed:
        # f returns lower precision than its inputs (a Keras layer, a tf.cast inside):
        # steps sized for the inputs' dtype would drown in the outputs' rounding. (A closure
        # over float32 variables has no float64 input: nothing to say.)
        own = {slot.dtype for slot in program.sources} == {dtype}
        return dtype, None if own else ReturnsLower(name, dtype, computed)
    if dtype == "float64" and (rounded := _rounds_to_float32(recording, diff_outputs)):
        return "float32", RoundsToFloat32(name, rounded)
    return dtype, None


def _context(recording: Recording, options: CheckOptions, settings: CheckSettings
             ) -> tuple[CheckContext, list[Note]]:
    """Outputs to check, upstreams and the tolerance of the lowest precision involved (f's
    program then sized for it), with what the choice has to say."""
    diff_outputs = _validate_outputs(recording, function_name(recording.program.function))
    upstreams = resolve_upstreams(
        options.upstream,
        [(recording.outputs[k].path, recording.outputs[k].shape) for k in diff_outputs],
        options.seed, [recording.outputs[k].complex_dtype is not None for k in diff_outputs])
    # Locating a NaN compares nothing: no step or tolerance to size (nor a graph to trace).
    dtype, note = ((recording.program.compute_dtype, None) if options.kinds <= {Kind.NON_FINITE}
                   else _sizing_dtype(recording, diff_outputs))
    if dtype != recording.program.compute_dtype:
        recording = replace(recording, program=recording.program.in_dtype(dtype))
    return CheckContext(recording, options, settings,
                        tolerance_for(dtype, options.atol, options.rtol),
                        dtype, tuple(upstreams), tuple(diff_outputs)), [note] if note else []


def _full_mode(ctx: CheckContext) -> tuple[Findings, list[tuple[JudgedInput, GradientOutcome]]]:
    found = Findings()
    inputs = []
    for index, slot in enumerate(ctx.program.slots):
        if not slot.differentiable:
            continue
        analysis, notes = analyse(ctx, index)
        found.notes += notes
        blocks, judged = judge_input(ctx, analysis)
        found.extend(blocks)
        vjp, vjp_found = check_vjp(ctx, judged)
        found.extend(vjp_found)
        found.blocks = [replace(b, vjp=vjp.value) if b.input == slot.name else b
                        for b in found.blocks]
        inputs.append((judged, vjp))
    return found, inputs


def _prepared_and_recorded(function: Callable[..., Any], named: Sequence[NamedArgument],
                           options: CheckOptions, evaluation: Evaluation
                           ) -> tuple[Prepared, Recording]:
    """f bound and called once, then called under a GradientTape. Locating a NaN compares no
    two calls: where binding takes one call (one dtype to try), the taped call is the only one
    (on ResNet50, one eager forward pass less); where f raises there, the untaped call runs
    first again, so that f's error reads as it always does."""
    bound = _bound_uncalled(named, options, evaluation)
    prepared = prepare(function, named, options.dtype, evaluation) if bound is None else replace(
        bound, program=replace(bound.program, function=function))
    evaluation.announce(f"{function_name(function)} under a GradientTape")
    try:
        return prepared, record(prepared.program)
    except Exception:
        if bound is not None:
            prepare(function, named, options.dtype, evaluation)  # raises as f alone raises
        raise


def _bound_uncalled(named: Sequence[NamedArgument], options: CheckOptions,
                    evaluation: Evaluation) -> Prepared | None:
    """f's arguments bound as `prepare` binds them, without calling f, when only a NaN is
    located and binding would call f once (else None: dtypes tried against each other)."""
    if not options.kinds <= {Kind.NON_FINITE}:
        return None
    calls: list[None] = []

    def uncalled(*args: Any, **kwargs: Any) -> None:
        calls.append(None)

    bound = prepare(uncalled, named, options.dtype, evaluation)
    return bound if len(calls) == 1 and not bound.notes else None


def check_function(function: Callable[..., Any], named: Sequence[NamedArgument],
               options: CheckOptions, settings: CheckSettings, target_label: str) -> Report:
    """Evaluate f, compare autodiff with finite differences, and report every finding."""
    return check_program(function, named, options, settings, target_label)[0]


def check_program(function: Callable[..., Any], named: Sequence[NamedArgument],
                  options: CheckOptions, settings: CheckSettings, target_label: str
                  ) -> tuple[Report, Program]:
    """check_function, also returning f bound to its arguments (for diagnosis to reuse)."""
    name = function_name(function)
    evaluation = Evaluation(vectorise=settings.vectorise, wrt=options.wrt, phase=settings.phase)
    evaluation.announce(f"the first calls of {name} and its gradient")
    prepared, recording = _prepared_and_recorded(function, named, options, evaluation)
    ctx, sizing = _context(recording, options, settings)
    recording, program = ctx.recording, ctx.program
    validate_registered(ctx)
    found = Findings(notes=[*prepared.notes, *recording.notes, *sizing] + [
        s.note for s in program.slots if s.note] + [
        OutputNotChecked(o.name, o.reason or "") for o in recording.outputs
        if not o.differentiable])
    # Locating a NaN takes one evaluation: random draws do not stand in its way.
    changed = None if options.kinds <= {Kind.NON_FINITE} else changed_between_calls(
        prepared.result, recording, ctx.diff_outputs, name)
    if changed is None and ctx.wants(Kind.NONDETERMINISM):
        changed = backward_changed(recording, ctx.diff_outputs, ctx.upstreams, name)
    judged: list[tuple[JudgedInput, GradientOutcome]] = []
    if changed is not None:
        found.results.append(changed)
    else:
        if options.kinds & SWEPT_KINDS:
            choice = choose_mode(options, program,
                                 [ctx.outputs[k].shape for k in ctx.diff_outputs],
                                 recording.call_seconds)
            if choice.mode is Mode.FAST:
                found.extend(check_fast(ctx, choice.reason))
            else:
                full, judged = _full_mode(ctx)
                found.extend(full)
        found.extend(check_registered(ctx))
    found.results += check_upstreams(ctx) + unbuilt_layer_results(recording)
    found.results = variable_in_call_results(recording, found.results)
    found.notes += [note for note in recording.workarounds if note not in found.notes]
    inputs, outputs = _tensor_infos(recording)
    return Report(
        target=target_label, inputs=inputs, outputs=outputs, checks=tuple(found.results),
        notes=tuple(found.notes), blocks=tuple(found.blocks),
        explain=(explanation(ctx, judged, found.results)
                 if options.explain and judged else None),
    ), program

