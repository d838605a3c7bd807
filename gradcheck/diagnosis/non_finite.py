"""NaN and infinite values and gradients: the op that first made them, at the user's line, and
why (a tf.where branch not taken, an infinite derivative), as findings and their causes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from gradcheck.diagnosis.explained import attribute
from gradcheck.engine.program import Program
from gradcheck.evidence.causes import (
    FirstNonFinite,
    NonFiniteOp,
    NoNonFiniteOp,
    Source,
    TensorFlowGradientOp,
    WrongGradientReason,
)
from gradcheck.evidence.non_finite import (
    NonFiniteOrigin,
    NonFiniteSeen,
    NonFiniteUntraceable,
    NoVerdictAtNonFinite,
)
from gradcheck.forensics.non_finite import (
    NonFiniteAnalysis,
    NonFiniteValue,
    OriginOp,
    analyse_non_finite,
    eager_non_finite,
)
from gradcheck.kinds.compiled.evidence import CompiledNotFinite
from gradcheck.kinds.jvp.evidence import ModeNotFinite
from gradcheck.options import CheckOptions
from gradcheck.report import Attribution, Cause, CheckResult, Kind, Mistake, Relation, Status

# The findings a non-finite value explains (their numbers are NaN against something).
SYMPTOMS = frozenset({Kind.JACOBIAN, Kind.VJP, Kind.FAST, Kind.COMPILED, Kind.JVP,
                      Kind.SECOND_ORDER, Kind.HESSIAN, Kind.CONNECTED})
# Of those, the ones that compare autodiff with finite differences of f's values.
COMPARED = frozenset({Kind.JACOBIAN, Kind.VJP, Kind.FAST, Kind.SECOND_ORDER, Kind.HESSIAN})
MODES = {True: "tf.function(jit_compile=True)", False: "tf.function"}
SECOND_ORDERS = frozenset({Kind.SECOND_ORDER, Kind.HESSIAN})


def _op_name(origin: OriginOp) -> str:
    inside = f" (inside {origin.scope})" if origin.scope else ""
    return f"{origin.op}{inside}"


def _xla_branch(origin: OriginOp, jit: bool) -> bool:
    """A gradient NaN that XLA alone makes in the user's tf.where branch not taken: eager
    TensorFlow's gradient kernels (SqrtGrad, RsqrtGrad, ReciprocalGrad) give 0 for the zero
    upstream tf.where sends there, XLA's give 0 × inf (tensorflow/tensorflow#118674)."""
    branch = origin.branch
    return (jit and not origin.second and branch is not None
            and branch.untaken and branch.library is None and branch.location is not None)


def _facts(origin: OriginOp, jit: bool = False) -> NonFiniteOp:
    branch = origin.branch
    return NonFiniteOp(origin.op, _op_name(origin), origin.kernel, origin.location, origin.backward,
                       origin.produced, origin.arguments,
                       untaken=branch is not None and branch.untaken,
                       branch=branch.location if branch is not None else None,
                       branch_library=branch.library if branch is not None else None,
                       second=origin.second, xla=_xla_branch(origin, jit),
                       fed_by=origin.fed_by)


def _mistake(origin: OriginOp) -> Mistake:
    if origin.op == "Placeholder":
        return Mistake.NON_FINITE_INPUT
    if origin.branch is not None and origin.branch.untaken:
        return Mistake.UNTAKEN_BRANCH
    return Mistake.INFINITE_DERIVATIVE if origin.backward else Mistake.NON_FINITE_VALUE


def _result(value: NonFiniteValue, analysis: NonFiniteAnalysis, variant: str | None
            ) -> CheckResult:
    evidence = NonFiniteSeen(variant or "eager", tuple(
        NonFiniteOrigin(o.op, o.kernel, o.location, o.backward, o.produced)
        for o in value.origins), value.name, value.gradient, value.produced, value.count,
        value.size, value.index, analysis.order)
    if not value.origins:
        return CheckResult(Kind.NON_FINITE, Status.FAIL, evidence=evidence, **_where(value),
                           cause=Cause(Mistake.NON_FINITE, facts=NoNonFiniteOp()))
    first = value.origins[0]
    facts = FirstNonFinite(_facts(first, analysis.jit),
                           tuple(_facts(o) for o in value.origins[1:4]),
                           value.gradient, analysis.dtype, analysis.order, source=first.source)
    # The source's line when the cause is there (a fill, a hyperparameter), else the op's.
    location = (first.source.location if first.source is not None else None) or first.location
    cause = Cause(_mistake(first), _op_name(first), location, facts)
    return CheckResult(Kind.NON_FINITE, Status.FAIL, evidence=evidence,
                       location=location, worst_index=value.index or _batch_index(first.source),
                       cause=cause, **_where(value))


def _batch_index(source: Source | None) -> tuple[int, ...] | None:
    """For a scalar loss: the batch's sample (and feature) where the source made it so."""
    sample = getattr(source, "sample", None)
    if sample is None:
        return None
    column = getattr(source, "column", None)
    return (sample,) if column is None else (sample, column)


def _where(value: NonFiniteValue) -> dict[str, Any]:
    return {"input": value.name, "output": None} if value.gradient else {
        "input": None, "output": value.name}


def _explained_by_outputs(analysis: NonFiniteAnalysis) -> list[NonFiniteValue]:
    """The values to report: f's outputs, and gradients whose origins f's do not explain."""
    outputs = [v for v in analysis.values if not v.gradient]
    known = {(o.op, o.location) for v in outputs for o in v.origins}
    return outputs + [v for v in analysis.values if v.gradient and not (
        {(o.op, o.location) for o in v.origins} <= known and outputs)]


def _compiled_variants(checks: Sequence[CheckResult]) -> list[bool]:
    """XLA (True) or plain tf.function (False): the compiled variants whose VJP alone has
    non-finite values."""
    return sorted({c.evidence.jit for c in checks if c.check == Kind.COMPILED and c.failed
                   and isinstance(c.evidence, CompiledNotFinite)}, reverse=True)


def non_finite_results(program: Program, checks: Sequence[CheckResult], options: CheckOptions
                       ) -> tuple[list[CheckResult], list[CheckResult]]:
    """`non-finite` findings (only when something is NaN or infinite), and the checks, with
    the symptoms they explain located at the op."""
    if Kind.NON_FINITE not in options.kinds or (options.kinds & SYMPTOMS and all(
            c.status in (Status.PASS, Status.SKIP) for c in checks)):
        return [], list(checks)
    if options.kinds <= {Kind.NON_FINITE}:
        located = _located(program)
        return located, _annotated(checks, located)
    outputs, eager = eager_non_finite(program)
    found: list[CheckResult] = []
    if eager:
        found = _traced_results(analyse_non_finite(program, outputs))
    else:
        for jit in _compiled_variants(checks):
            analysis = analyse_non_finite(program, outputs, jit=jit)
            if analysis is not None:
                found += [_result(v, analysis, MODES[jit])
                          for v in _explained_by_outputs(analysis)]
    if not found and any(c.failed and c.check in SECOND_ORDERS for c in checks):
        # f and its gradient are finite: the NaN is in the second derivative only.
        analysis = analyse_non_finite(program, outputs, order=2)
        if analysis is not None:
            found += [_result(v, analysis, None) for v in analysis.values if v.gradient]
    return found, _annotated(checks, found)


def _located(program: Program) -> list[CheckResult]:
    """Only locating a NaN (a training step's): the traced graph's one run says whether f or
    its VJP is non-finite, with no eager call first (a large model's costs a second pass)."""
    analysis = analyse_non_finite(program, None)
    if analysis is not None:
        return _traced_results(analysis)
    return _traced_results(None) if eager_non_finite(program)[1] else []


def _traced_results(analysis: NonFiniteAnalysis | None) -> list[CheckResult]:
    """The findings of f's traced graph once f or its VJP is known non-finite."""
    if analysis is not None:
        return [_result(v, analysis, None) for v in _explained_by_outputs(analysis)]
    return [CheckResult(Kind.NON_FINITE, Status.FAIL, evidence=NonFiniteUntraceable(),
                        cause=Cause(Mistake.NON_FINITE, facts=NoNonFiniteOp(traced=False)))]


def _xla_where(cause: Cause) -> Cause | None:
    """TensorFlow's (XLA's) gradient of a tf.where at its line, when the NaN is XLA's only."""
    facts = cause.facts
    if not isinstance(facts, FirstNonFinite) or not facts.first.xla:
        return None
    return Cause(Mistake.TENSORFLOW_GRADIENT, "tf.where", facts.first.branch,
                 TensorFlowGradientOp(facts.first.op, WrongGradientReason.XLA_UNTAKEN_BRANCH))


def _annotated(checks: Sequence[CheckResult], found: Sequence[CheckResult]) -> list[CheckResult]:
    if not found:
        return list(checks)
    annotated = []
    for check in checks:
        explaining = next((f for f in found if f.cause and (
            f.output is not None or f.input == check.input or (
                check.input is None and check.check in SECOND_ORDERS))), None)
        seen = explaining.evidence if explaining is not None else None
        if (explaining is not None and isinstance(seen, NonFiniteSeen) and not seen.gradient
                and check.failed and check.check in COMPARED and not check.location):
            # f's own value is NaN or inf: comparing its gradients with its differences says
            # nothing more than the non-finite finding (whose op may be a library's).
            annotated.append(CheckResult(
                check.check, Status.SKIP, input=check.input, output=check.output,
                location=explaining.location, evidence=NoVerdictAtNonFinite(
                    str(check.check), seen.name, seen.produced)))
            continue
        match = explaining if explaining is not None and explaining.location else None
        if match is not None and isinstance(check.evidence, ModeNotFinite) and not check.location:
            # Forward or reverse mode is NaN or infinite: the jvp check has no verdict, and
            # the op that makes the value so is its line.
            annotated.append(replace(check, location=match.location))
            continue
        if match is None or not check.failed or check.check not in SYMPTOMS or check.location:
            annotated.append(check)
            continue
        assert match.cause is not None
        if isinstance(check.evidence, CompiledNotFinite) and check.evidence.jit and (
                blamed := _xla_where(match.cause)) is not None:
            # XLA's gradient of the user's tf.where, not the user's code: at the tf.where.
            annotated.append(attribute(check, Attribution(Relation.TENSORFLOW_GRADIENT, blamed),
                                       location=blamed.location, cause=blamed))
            continue
        annotated.append(attribute(check, Attribution(Relation.NON_FINITE, match.cause),
                                   location=match.location, cause=match.cause))
    return annotated
