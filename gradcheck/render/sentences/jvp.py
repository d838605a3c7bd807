"""Sentences of the jvp check (forward mode against reverse mode)."""

from __future__ import annotations

from gradcheck.evidence.jvp import (
    ForwardGap,
    ForwardNotFinite,
    ForwardRaised,
    ModesAgree,
    ModesDisagree,
    ModesIndependent,
    NestedModesDisagree,
    NoForwardMode,
    NoReverseVJP,
    ReverseNotFinite,
)
from gradcheck.render.causes import fix, stated_cause, what
from gradcheck.render.sentences.dispatch import clause, sentence
from gradcheck.report import CheckResult


@sentence.register
def _no_reverse(evidence: NoReverseVJP, result: CheckResult) -> str:
    return f"no reverse-mode VJP for {evidence.input} to compare with (see the checks above)"


@sentence.register
def _raised(evidence: ForwardRaised, result: CheckResult) -> str:
    return f"forward mode could not run for {evidence.input}: {evidence.error}"


@sentence.register
def _no_forward_mode(evidence: NoForwardMode, result: CheckResult) -> str:
    return (f"forward mode (ForwardAccumulator) gives no JVP for {evidence.input} (None)"
            " although reverse mode gives a gradient: TensorFlow has no forward-mode rule on the"
            " path (a custom_gradient whose forward and grad_fn both leave TensorFlow, e.g."
            " NumPy through tf.numpy_function, which forward mode would differentiate through;"
            " or an op without one), so the two modes cannot be compared")


@sentence.register
def _reverse_not_finite(evidence: ReverseNotFinite, result: CheckResult) -> str:
    return (f"reverse mode gives {evidence.reverse:.6g} for {evidence.input} (forward mode"
            f" {evidence.forward:.6g}): not finite, so not comparable (see the non-finite"
            " check)")


@sentence.register
def _forward_not_finite(evidence: ForwardNotFinite, result: CheckResult) -> str:
    return (f"forward mode (ForwardAccumulator) gives ⟨u, Jv⟩ = {evidence.forward:.6g} for"
            f" {evidence.input} where reverse mode is finite ({evidence.reverse:.6g}): a"
            " forward-mode rule of an op on the path is not finite at this point (code using"
            " ForwardAccumulator or tf.autodiff.jvp would see it)")


@sentence.register
def _independent(evidence: ModesIndependent, result: CheckResult) -> str:
    return f"forward and reverse mode agree that the outputs do not depend on {evidence.input}"


@sentence.register
def _agree(evidence: ModesAgree, result: CheckResult) -> str:
    return (f"forward mode ⟨u, Jv⟩ = {evidence.forward:.6g} matches reverse mode ⟨Jᵀu, v⟩ ="
            f" {evidence.reverse:.6g} for a random v and u")


@sentence.register
def _disagree(evidence: ModesDisagree, result: CheckResult) -> str:
    return (f"forward mode (ForwardAccumulator) gives ⟨u, Jv⟩ = {evidence.forward:.6g} but"
            f" reverse mode (tape.gradient) gives ⟨Jᵀu, v⟩ = {evidence.reverse:.6g} for"
            f" {evidence.input}: the two modes disagree, so a gradient (often a custom_gradient"
            " grad_fn) is inconsistent")


@sentence.register
def _nested_disagree(evidence: NestedModesDisagree, result: CheckResult) -> str:
    return (f"forward mode (ForwardAccumulator) gives ⟨u, Jv⟩ = {evidence.forward:.6g} but"
            f" reverse mode (tape.gradient) gives ⟨Jᵀu, v⟩ = {evidence.reverse:.6g} for"
            f" {evidence.input}; f runs a ForwardAccumulator of its own, so forward mode over f"
            " nests accumulators (forward over forward), which TensorFlow's eager forward mode"
            " does not always get right: a warning about forward mode over f, not a verdict on"
            " its gradient (the jacobian and vjp checks judge that)")


@clause.register
def _gap_clause(evidence: ForwardGap, result: CheckResult) -> str:
    return f"no forward-mode verdict for {evidence.input}: {what(stated_cause(result))}"


@sentence.register
def _gap(evidence: ForwardGap, result: CheckResult) -> str:
    return f"{_gap_clause(evidence, result)}; {fix(stated_cause(result))}"
