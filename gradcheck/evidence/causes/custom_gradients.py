"""The facts of a custom gradient's mistakes, and their words: its grad_fn contract broken, and
the findings of its own check told as its grad_fn's."""

from __future__ import annotations

import dataclasses
from typing import Any

from gradcheck.evidence.causes.base import Facts, WhatAndFix
from gradcheck.evidence.causes.mistakes import Mistake

FIX_HINT = (
    "a grad_fn receives the upstream u and must return uᵀJ with its input's shape, e.g."
    " tf.linalg.matvec(J, upstream, transpose_a=True)"
)
_POSITIONAL = "TensorFlow treats only positional arguments as a custom_gradient's inputs, so"


@dataclasses.dataclass(frozen=True)
class OnItsOwn(Facts):
    """A finding of a custom gradient's own check (`finding`, a CheckResult: this layer lies
    below the report's), told as its grad_fn's mistake: by default its message, the fix its
    cause names told apart (a jacobian finding without a cause, the fast check's)."""

    finding: Any

    def words(self, mistake: Mistake) -> WhatAndFix:
        cause = self.finding.cause
        return self.unfixed(), cause.fix if cause else None

    def unfixed(self) -> str:
        """The finding's message without the cause's fix that ends it (told apart as the fix)."""
        return str(self.finding.message)


@dataclasses.dataclass(frozen=True)
class RaisedOnItsOwn(OnItsOwn):
    """A gradient that raised (its evidence a GradientRaised), the finding not attributed."""

    def unfixed(self) -> str:
        return raised_without_fix(self.finding.evidence, self.finding)


@dataclasses.dataclass(frozen=True)
class CausedOnItsOwn(OnItsOwn):
    """The jacobian check's finding, with the cause it named."""

    def words(self, mistake: Mistake) -> WhatAndFix:
        finding = self.finding
        return (f"grad_fn {finding.cause.what} for input {finding.input} ({finding.message})",
                finding.cause.fix)


@dataclasses.dataclass(frozen=True)
class NoneOnItsOwn(OnItsOwn):
    """The connected check's finding: grad_fn returns None where f depends on the input."""

    def words(self, mistake: Mistake) -> WhatAndFix:
        return (f"grad_fn returns None for input {self.finding.input}, but finite differences"
                f" show {self.finding.output} depends on it"), None


@dataclasses.dataclass(frozen=True)
class ProbedOnItsOwn(OnItsOwn):
    """The vjp check's finding; `probe` (a Cause) names what calling the site itself showed."""

    probe: Any

    def words(self, mistake: Mistake) -> WhatAndFix:
        finding = self.finding
        return (f"grad_fn {self.probe.what} for input {finding.input} ({finding.message})",
                self.probe.fix)


@dataclasses.dataclass(frozen=True)
class SecondOrderOnItsOwn(OnItsOwn):
    """The second-order or hessian check's finding."""

    def words(self, mistake: Mistake) -> WhatAndFix:
        finding = self.finding
        cause, x = finding.cause, finding.input
        wrong = cause.what if cause else "has a wrong second derivative"
        return (f"grad_fn {wrong}" + (f" for input {x}" if x else "")
                + f": {finding.message}"), None


def raised_clause(evidence: Any, result: Any) -> str:
    """The clause of a raised gradient (`evidence` a GradientRaised, `result` its CheckResult:
    typed loosely, as evidence.gradients and the report lie above); its sentence says it too."""
    return (f"computing the gradient of {result.output} with respect to {result.input} raised"
            f" {evidence.error}")


def raised_without_fix(evidence: Any, result: Any) -> str:
    """The sentence of a raised gradient up to its cause's fix."""
    said = raised_clause(evidence, result)
    if not evidence.dtype_mix or result.cause is None:
        return said
    return (f"{said}; the gradient mixes float32 and float64: a tf.constant of Python floats"
            " or a float32 tf.Variable is float32 while the inputs are float64")


@dataclasses.dataclass(frozen=True)
class ShapeOnItsOwn(Facts):
    """grad_fn returned `gradient_shape` for `input` of `input_shape`; `probe` (a Cause) names
    the wrong shape."""

    input: str | None
    gradient_shape: tuple[int, ...]
    input_shape: tuple[int, ...]
    probe: Any

    def words(self, mistake: Mistake) -> WhatAndFix:
        return (f"grad_fn returns shape {self.gradient_shape} for input {self.input} of shape"
                f" {self.input_shape}: it {self.probe.what}", self.probe.fix or FIX_HINT)


@dataclasses.dataclass(frozen=True)
class ContractSlip(Facts):
    """A grad_fn contract that the custom gradient `site` broke: the counts it `returned` and
    `expected`, the `names` involved (keywords, variables), an input's `dtype` against its
    `input_dtype`, whether it `paired` (input_grads, variable_grads) and whether its call
    passed any tensor `positionally`."""

    site: str
    returned: int | None = None
    expected: int | None = None
    names: tuple[str, ...] = ()
    input: str | None = None
    dtype: str | None = None
    input_dtype: str | None = None
    paired: bool = True
    positionally: bool = True

    def words(self, mistake: Mistake) -> WhatAndFix:
        return _slip(self, mistake), None


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
        repaired = (f"its first {facts.expected}" if (facts.returned or 0) > (facts.expected or 0)
                    else "None for the missing ones")
        return (f"grad_fn of {facts.site} returned {facts.returned} gradient(s) for"
                f" {facts.expected} input(s), so tape.gradient raises ValueError ('custom_gradient"
                f" function expected to return {facts.expected} gradients'); it must return"
                " exactly one per input, in order"
                + (f" (only positional arguments are inputs, not {names} passed by keyword at"
                   " this call: pass them positionally)" if facts.names else "")
                + f"; gradcheck's other checks take {repaired}")
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
