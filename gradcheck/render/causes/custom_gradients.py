"""The words of a custom gradient's mistakes: its grad_fn contract broken, and the findings of
its own check told as its grad_fn's."""

from __future__ import annotations

from gradcheck.evidence.causes import ContractSlip, OnItsOwn, ShapeOnItsOwn
from gradcheck.evidence.gradients import GradientRaised
from gradcheck.render.causes.dispatch import WhatAndFix, fix, what, words
from gradcheck.report import CheckResult, Kind, Mistake

FIX_HINT = (
    "a grad_fn receives the upstream u and must return uᵀJ with its input's shape, e.g."
    " tf.linalg.matvec(J, upstream, transpose_a=True)"
)
_POSITIONAL = "TensorFlow treats only positional arguments as a custom_gradient's inputs, so"


@words.register
def _on_its_own(facts: OnItsOwn, mistake: Mistake) -> WhatAndFix:
    finding: CheckResult = facts.finding
    cause, x = finding.cause, finding.input
    if finding.check == Kind.JACOBIAN and cause is not None:
        return f"grad_fn {what(cause)} for input {x} ({finding.message})", fix(cause)
    if finding.check == Kind.CONNECTED:
        return (f"grad_fn returns None for input {x}, but finite differences show"
                f" {finding.output} depends on it"), None
    if finding.check == Kind.VJP:
        return f"grad_fn {what(facts.probe)} for input {x} ({finding.message})", fix(facts.probe)
    if finding.check in (Kind.SECOND_ORDER, Kind.HESSIAN):
        wrong = what(cause) if cause else "has a wrong second derivative"
        return (f"grad_fn {wrong}" + (f" for input {x}" if x else "")
                + f": {finding.message}"), None
    return _unfixed(finding), fix(cause) if cause else None


def _unfixed(finding: CheckResult) -> str:
    """The finding's message without the cause's fix that ends it (told apart as the fix)."""
    if isinstance(finding.evidence, GradientRaised) and finding.attributed_to is None:
        return raised_without_fix(finding.evidence, finding)
    return finding.message


def raised_clause(evidence: GradientRaised, result: CheckResult) -> str:
    """The clause of a raised gradient (gradcheck.render.sentences.gradients says it too)."""
    return (f"computing the gradient of {result.output} with respect to {result.input} raised"
            f" {evidence.error}")


def raised_without_fix(evidence: GradientRaised, result: CheckResult) -> str:
    """The sentence of a raised gradient up to its cause's fix."""
    said = raised_clause(evidence, result)
    if not evidence.dtype_mix or result.cause is None:
        return said
    return (f"{said}; the gradient mixes float32 and float64: a tf.constant of Python floats"
            " or a float32 tf.Variable is float32 while the inputs are float64")


@words.register
def _shape_on_its_own(facts: ShapeOnItsOwn, mistake: Mistake) -> WhatAndFix:
    return (f"grad_fn returns shape {facts.gradient_shape} for input {facts.input} of shape"
            f" {facts.input_shape}: it {what(facts.probe)}", fix(facts.probe) or FIX_HINT)


def _keywords(facts: ContractSlip) -> str:
    names = ", ".join(facts.names)
    passed = ", ".join(f"{key}=..." for key in facts.names)
    if not facts.positionally:
        said = (f"{facts.site} is called with its tensors as keyword arguments ({passed}):"
                f" {_POSITIONAL} its grad_fn is never called and the gradient silently comes"
                " from the forward ops instead")
    else:
        said = (f"{facts.site} gets {names} by keyword ({passed}): {_POSITIONAL} no gradient"
                " flows to it through grad_fn (None) and grad_fn must return one gradient per"
                " positional argument only")
    return f"{said}; pass {names} positionally"


def _slip(facts: ContractSlip, mistake: Mistake) -> str:
    names = ", ".join(facts.names)
    if mistake == Mistake.COUNT:
        return (f"grad_fn of {facts.site} returned {facts.returned} gradient(s) for"
                f" {facts.expected} input(s); it must return exactly one per input, in order"
                + (f" (only positional arguments are inputs, not {names} passed by keyword at"
                   " this call: pass them positionally)" if facts.names else ""))
    if mistake == Mistake.DTYPE:
        return (f"grad_fn of {facts.site} returned a {facts.dtype} gradient for input"
                f" {facts.input} of dtype {facts.input_dtype}; each gradient must have its"
                " input's dtype (tf.cast it)")
    if mistake == Mistake.VARIABLES:
        return (f"{facts.site} reads tf.Variable(s) {names} but its grad_fn has no"
                " `variables=None` keyword: TensorFlow refuses it ('grad_fn must accept"
                " keyword argument variables'); add the keyword and return"
                " (input_grads, variable_grads)")
    if mistake == Mistake.VARIABLE_COUNT and not facts.paired:
        return (f"grad_fn of {facts.site} takes variables= but did not return the pair"
                " (input_grads, variable_grads)")
    if mistake == Mistake.VARIABLE_COUNT:
        return (f"grad_fn of {facts.site} returned {facts.returned} variable gradient(s) for"
                f" {facts.expected} variable(s) ({names}); return one per variable, in the"
                " order of `variables`")
    return _keywords(facts)


@words.register
def _contract_slip(facts: ContractSlip, mistake: Mistake) -> WhatAndFix:
    return _slip(facts, mistake), None
