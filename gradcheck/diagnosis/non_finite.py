"""NaN and infinite values and gradients in words: the op that first made them, at the user's
line, why (a tf.where branch not taken, an infinite derivative), and what to change."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gradcheck.diagnosis.explained import attribute
from gradcheck.evidence.compiled import CompiledNotFinite
from gradcheck.evidence.non_finite import NonFiniteOrigin, NonFiniteSeen, NonFiniteUntraceable
from gradcheck.options import CheckOptions
from gradcheck.report import Attribution, Cause, CheckResult, Kind, Mistake, Relation, Status
from gradcheck.tf.non_finite import (
    NonFiniteAnalysis,
    NonFiniteValue,
    Origin,
    analyse_non_finite,
    differentiable_outputs,
    eager_non_finite,
)
from gradcheck.tf.program import Program

# The findings a non-finite value explains (their numbers are NaN against something).
SYMPTOMS = frozenset({Kind.JACOBIAN, Kind.VJP, Kind.FAST, Kind.COMPILED, Kind.JVP,
                      Kind.SECOND_ORDER, Kind.HESSIAN, Kind.CONNECTED})
MODES = {True: "tf.function(jit_compile=True)", False: "tf.function"}
# How the user wrote an op, with {v} for its (first) argument.
SPELLINGS = {"Sqrt": "tf.sqrt({v})", "Rsqrt": "tf.math.rsqrt({v})", "Log": "tf.math.log({v})",
             "Log1p": "tf.math.log1p({v})", "Exp": "tf.exp({v})", "Pow": "tf.pow({v}, p)",
             "RealDiv": "a / {v}", "Div": "a / {v}", "Reciprocal": "1.0 / {v}",
             "Xlogy": "tf.math.xlogy(a, {v})", "Acos": "tf.acos({v})", "Asin": "tf.asin({v})",
             "Atanh": "tf.atanh({v})", "Lgamma": "tf.math.lgamma({v})"}
SAFE_FIXES = {
    "Sqrt": "keep its argument away from 0 where the gradient is needed (tf.sqrt(v + eps),"
            " or tf.sqrt(tf.where(v > 0, v, 1.0)) with the result replaced where v is 0)",
    "Rsqrt": "keep its argument away from 0 (tf.math.rsqrt(v + eps))",
    "Log": "keep its argument positive (tf.math.log(tf.maximum(p, eps))), or write p·log p as"
           " tf.math.xlogy(p, p), which is 0 at p = 0",
    "Exp": "keep its argument small enough (tf.minimum(v, limit)), or compute in log space"
           " (tf.nn.softplus, tf.math.log_sigmoid, tf.math.reduce_logsumexp)",
    "RealDiv": "keep the denominator away from 0, or use tf.math.divide_no_nan",
    "Div": "keep the denominator away from 0, or use tf.math.divide_no_nan",
    "Reciprocal": "keep its argument away from 0, or use tf.math.divide_no_nan(1.0, v)",
    "Pow": "keep the base positive where the exponent is fractional or negative",
}


def _op_name(origin: Origin) -> str:
    inside = f" (inside {origin.scope})" if origin.scope else ""
    return f"{origin.op}{inside}"


def _call(origin: Origin) -> str:
    shown = ", ".join(f"{a:.4g}" for a in origin.arguments)
    return f"{origin.op}({shown})" if origin.arguments else origin.op


def _origin_words(origin: Origin) -> str:
    at = f" at {origin.location}" if origin.location else ""
    if origin.op == "Placeholder":
        return "the input itself is not finite"
    if origin.backward:
        kernel = f" ({origin.kernel} in the backward pass)" if origin.kernel != origin.op else ""
        return (f"the gradient of {_op_name(origin)}{at}: its local derivative at"
                f" {_call(origin)} is {origin.produced}{kernel}")
    return f"{_op_name(origin)}{at}, whose value {_call(origin)} is {origin.produced}"


def _branch_words(origin: Origin) -> str:
    branch = origin.branch
    if branch is None or not branch.untaken:
        return ""
    where = f" at {branch.location}" if branch.location else ""
    return (f"; {origin.op} feeds a branch of the tf.where{where} that is not taken at those"
            " elements: tf.where's gradient sends zeros into that branch, and zero times an"
            " infinite local gradient is NaN")


def _fix(origin: Origin) -> str:
    spelled = SPELLINGS.get(origin.op, f"{origin.op}({{v}})")
    if origin.branch is not None and origin.branch.untaken:
        return (f"make the branch's input safe with an inner tf.where, so both branches are"
                f" finite: tf.where(c, {spelled.format(v='tf.where(c, v, safe)')}, other), with"
                " a safe value where c is False (e.g. 1.0)")
    return SAFE_FIXES.get(origin.op, f"keep the inputs of {spelled.format(v='v')} inside the"
                          " range where it and its derivative are finite")


def _mistake(origin: Origin) -> Mistake:
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
        value.size, value.index)
    if not value.origins:
        return CheckResult(Kind.NON_FINITE, Status.FAIL, evidence=evidence, **_where(value),
                           cause=Cause(
                               Mistake.NON_FINITE, "no single op in the traced graph turns"
                               " finite values into it"))
    first = value.origins[0]
    stage = "of the backward pass " if value.gradient and first.backward else ""
    what = (f"the first op {stage}that turns finite values into non-finite ones is"
            f" {_origin_words(first)}{_branch_words(first)}")
    others = [("the gradient of " if o.backward else "") + o.op
              + (f" at {o.location}" if o.location else "") for o in value.origins[1:4]]
    if others:
        what += f" (also: {', '.join(others)})"
    if analysis.dtype:
        what += (f"; traced in {analysis.dtype}, the arguments' own dtype, as f does not"
                 " trace with promoted float64 inputs")
    cause = Cause(_mistake(first), what, culprit=_op_name(first), location=first.location,
                  fix=_fix(first))
    return CheckResult(Kind.NON_FINITE, Status.FAIL, evidence=evidence,
                       location=first.location, worst_index=value.index, cause=cause,
                       **_where(value))


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
    if Kind.NON_FINITE not in options.kinds or all(
            c.status in (Status.PASS, Status.SKIP) for c in checks):
        return [], list(checks)
    outputs = differentiable_outputs(program)
    found: list[CheckResult] = []
    if eager_non_finite(program, outputs):
        analysis = analyse_non_finite(program, outputs)
        if analysis is not None:
            found += [_result(v, analysis, None) for v in _explained_by_outputs(analysis)]
        else:
            found.append(CheckResult(Kind.NON_FINITE, Status.FAIL,
                                     evidence=NonFiniteUntraceable(),
                                     cause=Cause(Mistake.NON_FINITE, "not traceable")))
    else:
        for jit in _compiled_variants(checks):
            analysis = analyse_non_finite(program, outputs, jit=jit)
            if analysis is not None:
                found += [_result(v, analysis, MODES[jit])
                          for v in _explained_by_outputs(analysis)]
    return found, _annotated(checks, found)


def _annotated(checks: Sequence[CheckResult], found: Sequence[CheckResult]) -> list[CheckResult]:
    if not found:
        return list(checks)
    annotated = []
    for check in checks:
        match = next((f for f in found if f.cause and f.location and (
            f.output is not None or f.input == check.input)), None)
        if match is None or not check.failed or check.check not in SYMPTOMS or check.location:
            annotated.append(check)
            continue
        assert match.cause is not None
        annotated.append(attribute(check, Attribution(Relation.NON_FINITE, match.cause),
                                   location=match.location, cause=match.cause))
    return annotated
