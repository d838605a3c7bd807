"""The second-order check: g(x) = Σₖ uₖᵀ∂yₖ/∂x, each argument's VJP taken under an inner tape, is
checked by the first-order machinery (its Jacobian by nested tapes against central differences
of g; in fast mode random projections ⟨w, ∂g/∂x v⟩ narrowed down on failure), and the findings
are told as second derivatives: a grad_fn that is not differentiable, a wrong nested one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gradcheck.checks.context import CheckContext, Findings
from gradcheck.engine.nested import record_gradient
from gradcheck.engine.program import Slot
from gradcheck.engine.recording import Recording
from gradcheck.errors import FunctionError
from gradcheck.evidence.causes import NoSecondOrderGradient, SecondOrder
from gradcheck.evidence.gradients import GradientRaised
from gradcheck.evidence.notes import SecondDerivatives
from gradcheck.forensics.gaps import (
    MissingSecondOrder,
    forward_op_location,
    missing_gradient_of,
    second_order_gaps,
)
from gradcheck.kinds.jacobian.check import judge_input
from gradcheck.kinds.jacobian.fast import check_fast
from gradcheck.kinds.jacobian.full import analyse
from gradcheck.kinds.jacobian.mode import choose_mode
from gradcheck.kinds.jacobian.verdicts import comparison_fields
from gradcheck.kinds.second_order.evidence import (
    Asymmetric,
    MissingInTensorFlow,
    NotDifferentiated,
    ProjectedAsymmetric,
    ProjectedSymmetric,
    SecondOrderOf,
    Symmetric,
)
from gradcheck.kinds.second_order.judging import judge_projected_symmetry, judge_symmetry
from gradcheck.report import Cause, CheckResult, Kind, Mistake, Status
from gradcheck.spelling import format_index

_ASYMMETRIC = Cause(Mistake.ASYMMETRIC, facts=SecondOrder())
# What the first-order machinery checks on g.
GRADIENT_KINDS = frozenset({Kind.JACOBIAN, Kind.GRAD_SHAPE, Kind.CONNECTED, Kind.CUSTOM_GRADIENT,
                            Kind.KINK, Kind.FAST})
# A random stream of its own for the upstreams w of g.
SECOND_STREAM = 5


@dataclass(frozen=True)
class Differentiated:
    """What is differentiated (the VJP with these upstreams, per argument) and the kind its
    findings are reported as."""

    kind: Kind
    upstreams: tuple[np.ndarray, ...]
    # g's output per differentiated argument: "dy/dx" for a Hessian.
    names: dict[int, str]


def argument_rows(ctx: CheckContext) -> list[int]:
    """The arguments a second derivative is taken for (a tf.Variable argument cannot be
    moved for finite differences of its gradient)."""
    return [i for i, slot in enumerate(ctx.program.slots)
            if slot.differentiable and slot.argument and not slot.is_variable]


def _gradient_context(ctx: CheckContext, recording: Recording) -> CheckContext:
    rng = np.random.default_rng((ctx.options.seed, SECOND_STREAM))
    outputs = tuple(k for k, leaf in enumerate(recording.outputs) if leaf.differentiable)
    upstreams = tuple(rng.standard_normal(recording.outputs[k].shape) for k in outputs)
    options = replace(ctx.options, kinds=GRADIENT_KINDS, upstream=())
    return CheckContext(recording, options, ctx.settings, ctx.tolerance, ctx.tolerance_dtype,
                        upstreams, outputs)


def differentiate_gradient(ctx: CheckContext, what: Differentiated) -> Findings:
    """The Jacobian of g checked like a first-order Jacobian, block by block (or by random
    projections when it is too large), and the symmetry of the autodiff blocks."""
    rows = list(what.names)
    try:
        recording = record_gradient(ctx.program, rows, ctx.diff_outputs, what.upstreams,
                                    list(what.names.values()))
    except FunctionError as error:
        found = Findings()
        found.add(what.kind, Status.SKIP, evidence=NotDifferentiated(error.message))
        return found
    gctx = _gradient_context(ctx, recording)
    if not gctx.diff_outputs:
        found = Findings()
        found.add(what.kind, Status.SKIP, evidence=NotDifferentiated())
        return found
    choice = choose_mode(ctx.options, gctx.program,
                         [gctx.outputs[k].shape for k in gctx.diff_outputs],
                         recording.call_seconds)
    if choice.mode == "fast":
        found = check_fast(gctx, choice.reason)
        found.results += _projected_symmetry(gctx, what.kind, rows)
    else:
        found = Findings()
        autodiff: list[dict[int, np.ndarray | None]] = []
        for column in rows:
            analysis, notes = analyse(gctx, column)
            found.notes += notes
            blocks, judged = judge_input(gctx, analysis)
            found.extend(blocks)
            autodiff.append({k: judged.autodiff(k) for k in gctx.diff_outputs})
        found.results += _symmetry(gctx, what.kind, rows, autodiff)
    found.notes += recording.workarounds
    return _told(found, what.kind, _missing_in_tensorflow(ctx, recording, found))


def _raised(result: CheckResult) -> str:
    """The error computing the gradient raised, when it did."""
    evidence = result.evidence
    return evidence.error if isinstance(evidence, GradientRaised) else ""


def _missing_in_tensorflow(ctx: CheckContext, recording: Recording,
                           found: Findings) -> dict[str, list[MissingSecondOrder]]:
    """Per argument whose second derivative is None (or raises LookupError): the gradient ops
    TensorFlow has no gradient for, at the user's op (its gap, not the user's grad_fn)."""
    gaps: dict[str, list[MissingSecondOrder]] = {}
    for result in found.results:
        index = next((i for i, s in enumerate(recording.program.slots)
                      if s.name == result.input), None)
        if index is None or not result.failed:
            continue
        if result.check == Kind.CONNECTED:
            if located := second_order_gaps(recording.program, index):
                gaps[result.input or ""] = located
        elif result.check == Kind.CUSTOM_GRADIENT and (
                missing := missing_gradient_of(_raised(result))) and (
                op := forward_op_location(ctx.program, index, missing)) is not None:
            gaps[result.input or ""] = [MissingSecondOrder(missing, op[0], op[1])]
    return gaps


def _symmetry(gctx: CheckContext, kind: Kind, rows: Sequence[int],
              autodiff: Sequence[dict[int, np.ndarray | None]]) -> list[CheckResult]:
    """The Jacobian of a gradient is symmetric where f is twice differentiable: an asymmetric
    one from nested tapes means a wrong second derivative (a nested custom gradient)."""
    slots = [gctx.program.slots[i] for i in rows]
    sizes = [int(np.prod(slot.shape, dtype=np.int64)) for slot in slots]
    blocks = [[column.get(k) for column in autodiff] for k in gctx.diff_outputs]
    if not blocks or not rows or any(b is None or np.size(b) != sizes[r] * sizes[c]
           for r, row in enumerate(blocks) for c, b in enumerate(row)):
        return []  # a cut or wrong-shaped second derivative: reported block by block
    matrix = np.block([[np.asarray(b, dtype=np.float64).reshape(sizes[r], sizes[c])
                        for c, b in enumerate(row)] for r, row in enumerate(blocks)])
    comparison = judge_symmetry(matrix, gctx.tolerance)
    if comparison is None:
        return []
    if comparison.ok and kind != Kind.HESSIAN:
        return []  # said only where the Hessian is the subject
    if comparison.ok:
        return [CheckResult(kind, Status.PASS, evidence=Symmetric(comparison.max_abs_err),
                            **comparison_fields(comparison))]
    a, b = comparison.worst_index or (0, 0)
    first, second = _element(slots, sizes, a), _element(slots, sizes, b)
    return [CheckResult(
        kind, Status.FAIL, evidence=Asymmetric(
            comparison.max_abs_err, first, second, float(matrix[a, b]), float(matrix[b, a]),
            comparison.n_bad, comparison.size),
        cause=_ASYMMETRIC, **comparison_fields(comparison))]


def _projected_symmetry(gctx: CheckContext, kind: Kind, rows: Sequence[int]
                        ) -> list[CheckResult]:
    """Fast mode's symmetry: ⟨w, H v⟩ against ⟨v, H w⟩ for random w and v, two nested
    backward passes (H here is ∂g/∂x from nested tapes; Hᵀw is what tape.gradient of g gives)."""
    slots = [gctx.program.slots[i] for i in rows]
    if [gctx.outputs[k].shape for k in gctx.diff_outputs] != [slot.shape for slot in slots]:
        return []
    rng = np.random.default_rng((gctx.options.seed, SECOND_STREAM, 1))
    w, v = ([rng.standard_normal(slot.shape) for slot in slots] for _ in range(2))

    def pulled_back(upstreams: list[np.ndarray]) -> list[np.ndarray] | None:
        outcomes = gctx.recording.gradients(gctx.diff_outputs, slots, upstreams)
        if any(o.error is not None or (o.value is not None and o.shape != slot.shape)
               for o, slot in zip(outcomes, slots)):
            return None  # reported by the projections themselves
        return [np.zeros(slot.shape) if o.value is None else o.value
                for o, slot in zip(outcomes, slots)]

    hw, hv = pulled_back(w), pulled_back(v)
    verdict = None if hw is None or hv is None else judge_projected_symmetry(
        hw, hv, w, v, gctx.tolerance)
    if verdict is None:
        return []
    compared = (verdict.w_h_v, verdict.v_h_w, verdict.allowed)
    fields: dict[str, Any] = {"max_abs_err": verdict.difference,
                              "excess": verdict.difference / verdict.allowed}
    if verdict.ok:
        return [] if kind != Kind.HESSIAN else [CheckResult(
            kind, Status.PASS, evidence=ProjectedSymmetric(*compared), **fields)]
    return [CheckResult(kind, Status.FAIL, evidence=ProjectedAsymmetric(*compared),
                        cause=_ASYMMETRIC, **fields)]


def _element(slots: Sequence[Slot], sizes: Sequence[int], flat: int) -> str:
    """x[1] for a position in the arguments' elements laid end to end."""
    for slot, size in zip(slots, sizes):
        if flat < size:
            index = (tuple(int(i) for i in np.unravel_index(flat, slot.shape)) if slot.shape
                     else None)
            return f"{slot.name}{format_index(index)}"
        flat -= size
    return str(flat)


def _told(found: Findings, kind: Kind,
          gaps: dict[str, list[MissingSecondOrder]] | None = None) -> Findings:
    """g's first-order findings told as second derivatives of f (a None one at TensorFlow's
    missing gradient when that is why)."""
    judged = {(r.input, r.output) for r in found.results if r.check != Kind.CONNECTED}
    second = Findings(notes=[SecondDerivatives(note) for note in found.notes],
                    blocks=found.blocks)
    for result in found.results:
        if result.check == Kind.CONNECTED and result.status == Status.PASS \
                and (result.input, result.output) in judged:
            continue  # "g is connected to x": the block's own verdict follows
        # The symmetry finding is already of the kind; g's own findings are first-order kinds.
        if result.check in (Kind.CONNECTED, Kind.CUSTOM_GRADIENT) and result.failed \
                and result.input in (gaps or {}):
            second.results.append(_tensorflow_gap(result, kind, (gaps or {})[result.input]))
            continue
        second.results.append(result if result.check == kind else _as_second_order(result, kind))
    return second


def _tensorflow_gap(result: CheckResult, kind: Kind,
                    gaps: list[MissingSecondOrder]) -> CheckResult:
    """A None second derivative because TensorFlow registers no gradient for a gradient op."""
    first = gaps[0]
    op = first.op
    cause = Cause(Mistake.NO_SECOND_ORDER_GRADIENT, op, first.location,
                  NoSecondOrderGradient(op, first.gradient_op))
    return replace(result, check=kind, cause=cause, location=first.location,
                   evidence=MissingInTensorFlow(result, result.check == Kind.CUSTOM_GRADIENT))


def _as_second_order(result: CheckResult, kind: Kind) -> CheckResult:
    if result.check == Kind.KINK:
        return replace(result, evidence=SecondOrderOf(result))
    if not result.failed:
        return replace(result, check=kind, evidence=SecondOrderOf(result))
    cause: Cause
    if result.check == Kind.CONNECTED:
        cause = Cause(Mistake.SECOND_ORDER_NONE, facts=SecondOrder())
    elif result.check == Kind.CUSTOM_GRADIENT:
        cause = Cause(Mistake.SECOND_ORDER_RAISED, facts=SecondOrder())
    elif result.check == Kind.GRAD_SHAPE:
        cause = Cause(Mistake.WRONG_SHAPE, facts=SecondOrder())
    else:
        mistake = result.cause.mistake if result.cause else Mistake.WRONG_VALUES
        cause = Cause(mistake, facts=SecondOrder(result.cause))
    return replace(result, check=kind, cause=cause, evidence=SecondOrderOf(result, told=True))


def check_second_order(ctx: CheckContext) -> Findings:
    """The derivative of the VJP g(x) = Σₖ uₖᵀJₖ(x), with respect to every argument."""
    vjp = (f"uᵀ{ctx.outputs[ctx.diff_outputs[0]].name}" if len(ctx.diff_outputs) == 1
           else "Σₖuₖᵀyₖ")
    names = {i: f"d({vjp})/d{ctx.program.slots[i].name}" for i in argument_rows(ctx)}
    if not names:
        return Findings()
    return differentiate_gradient(ctx, Differentiated(Kind.SECOND_ORDER, ctx.upstreams, names))
