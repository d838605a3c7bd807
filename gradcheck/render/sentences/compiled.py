"""Sentences of the compiled check (eager against tf.function and XLA)."""

from __future__ import annotations

from gradcheck.evidence.compiled import (
    CompiledDiffers,
    CompiledElements,
    CompiledMatches,
    CompiledNotFinite,
    EagerNotFinite,
    NoEagerVJP,
    NoGradientEither,
    NoneOnly,
    OpDiverged,
    Untraceable,
    ValuesDiffer,
    XlaUnsupported,
)
from gradcheck.render.causes import fix, stated_cause
from gradcheck.render.sentences.dispatch import clause, sentence
from gradcheck.report import CheckResult
from gradcheck.spelling import format_index


@sentence.register
def _no_eager(evidence: NoEagerVJP, result: CheckResult) -> str:
    return "no eager VJP to compare with (see the checks above)"


@clause.register
def _xla_unsupported_clause(evidence: XlaUnsupported, result: CheckResult) -> str:
    if evidence.ops is not None:
        return f"XLA cannot compile the VJP: no XLA kernel for {evidence.ops}"
    return f"XLA cannot compile the VJP ({evidence.error})"


@sentence.register
def _xla_unsupported(evidence: XlaUnsupported, result: CheckResult) -> str:
    said = _xla_unsupported_clause(evidence, result)
    if evidence.op is None:
        return said
    gradient = "the gradient of " if evidence.backward else ""
    return f"{said}; the op: {gradient}{evidence.op} at {evidence.location}"


@clause.register
def _untraceable_clause(evidence: Untraceable, result: CheckResult) -> str:
    return f"{evidence.mode} cannot trace f ({evidence.error}): the gradient works eagerly only"


@sentence.register
def _untraceable(evidence: Untraceable, result: CheckResult) -> str:
    return f"{_untraceable_clause(evidence, result)}; {fix(stated_cause(result))}"


@sentence.register
def _values_differ(evidence: ValuesDiffer, result: CheckResult) -> str:
    flip = evidence.flip
    if evidence.diverged is not None:
        return _diverged(evidence, evidence.diverged)
    if flip is None:
        return (f"f itself returns other values under {evidence.mode} ({evidence.output}"
                " differs: random ops, or a kernel that computes differently), so its VJPs are"
                " not comparable")
    at = f" at {flip.location}" if flip.location else ""
    compared = ""
    if len(flip.eager) == 2 and len(flip.compiled) == 2:
        compared = (f" ({flip.comparison} of {flip.eager[0]:.9g} and {flip.eager[1]:.9g}"
                    f" eagerly, of {flip.compiled[0]:.9g} and {flip.compiled[1]:.9g} under XLA)")
    return (f"f itself returns other values under {evidence.mode} ({evidence.output} differs):"
            f" the tf.where{at} takes the other branch under XLA at"
            f" {format_index(flip.index)}{compared}: its condition is a tie at this point, which"
            " XLA's differently rounded arithmetic breaks the other way; f jumps there, so the"
            " two VJPs are of different branches and not comparable (not a wrong gradient):"
            " check at a point off the tf.where's boundary")


def _number(value: complex) -> str:
    return f"{value.real:.6g}" if value.imag == 0 else f"{value:.6g}"


def _diverged(evidence: ValuesDiffer, op: OpDiverged) -> str:
    at = f" at {op.location}" if op.location else ""
    said = (f"f itself returns other values under {evidence.mode} ({evidence.output} differs),"
            f" so its VJPs are not comparable: the first op whose value XLA computes otherwise"
            f" from the same inputs is {op.op}{at}, in {op.count} element(s) (at"
            f" {format_index(op.index)}: {_number(op.eager)} eagerly, {_number(op.compiled)}"
            " under XLA)")
    if op.random:
        return (f"{said}: a random op, whose numbers XLA draws otherwise than eager TensorFlow"
                " (with another generator, and ignoring the seeds of stateful ones), not a"
                " wrong gradient; draw them outside the function compiled with"
                " jit_compile=True and pass them in")
    if op.unconjugated:
        return (f"{said}: TensorFlow's XLA kernel of {op.op} leaves out the conjugate its eager"
                " kernel applies to complex inputs, not your code (tensorflow/tensorflow#62263,"
                f" #62268); keep {op.op} out of the function compiled with jit_compile=True")
    return (f"{said}: TensorFlow's XLA kernel of {op.op} computes otherwise than its eager one"
            f" there, or {op.op} amplifies rounding (its inputs agree to within rounding); keep"
            f" {op.op} out of the function compiled with jit_compile=True if the difference"
            " matters")


@sentence.register
def _eager_not_finite(evidence: EagerNotFinite, result: CheckResult) -> str:
    return (f"the eager VJP for {evidence.input} is not finite, so the one under"
            f" {evidence.mode} is not compared with it (see the non-finite check)")


@sentence.register
def _no_gradient_either(evidence: NoGradientEither, result: CheckResult) -> str:
    return f"{evidence.mode} and eager agree: no gradient for {evidence.input}"


@sentence.register
def _none_only(evidence: NoneOnly, result: CheckResult) -> str:
    x, mode = evidence.input, evidence.mode
    if evidence.eagerly:
        return f"the gradient for {x} is None eagerly, but not under {mode}"
    said = f"the gradient for {x} is None under {mode}, but not eagerly"
    if evidence.cut is None:
        return said
    at = f" at {evidence.location}" if evidence.location else ""
    said = (f"{said}: in f traced by {mode} the path from {x} is cut by {evidence.cut}{at},"
            " which has no gradient")
    if not evidence.dataset:
        return f"{said}; compute it with ops TensorFlow differentiates inside {mode}"
    return (f"{said}: {mode} turns a Python loop over a tf.data.Dataset into a dataset op, and"
            f" TensorFlow does not differentiate through it, so {x}'s gradient is lost"
            " (tensorflow/tensorflow#38453, #36306); fix: take the dataset's elements out"
            " of f (iterate the dataset outside the tf.function and pass each batch in), or"
            " loop over a tensor (for i in tf.range(n) over a stacked tensor), which"
            f" {mode} differentiates")


@sentence.register
def _matches(evidence: CompiledMatches, result: CheckResult) -> str:
    return (f"the VJP under {evidence.mode} matches the eager one (max abs err"
            f" {evidence.max_abs_err:.1e})")


@clause.register
def _not_finite_clause(evidence: CompiledNotFinite, result: CheckResult) -> str:
    return (f"the VJP for {evidence.input} under {evidence.mode} is not finite in"
            f" {evidence.count} of {evidence.size} elements where the eager one is")


@clause.register
def _differs_clause(evidence: CompiledDiffers, result: CheckResult) -> str:
    return (f"the VJP for {evidence.input} under {evidence.mode} differs from the eager one in"
            f" {evidence.count} of {evidence.size} elements")


def _worst(evidence: CompiledElements, result: CheckResult) -> str:
    return (f"{clause(evidence, result)}; worst {format_index(evidence.index)}:"
            f" {evidence.mode} {evidence.compiled:.6g}, eager {evidence.eager:.6g}")


@sentence.register
def _not_finite(evidence: CompiledNotFinite, result: CheckResult) -> str:
    return _worst(evidence, result)


@sentence.register
def _differs(evidence: CompiledDiffers, result: CheckResult) -> str:
    return f"{_worst(evidence, result)} ({evidence.excess:.3g}× the allowed error)"
