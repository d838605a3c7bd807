"""Sentences about custom gradients judged on their own and cut gradient paths."""

from __future__ import annotations

from gradcheck.evidence.diagnosis import (
    CutFound,
    CutNotFound,
    SiteCorrect,
    SiteMistake,
    SiteNoForwardMode,
    SiteUnchecked,
)
from gradcheck.render.causes import fix, stated_cause, what
from gradcheck.render.sentences.dispatch import clause, sentence
from gradcheck.report import CheckResult

USUAL_CAUSES = (
    "tf.Variable(...) built from inputs, .numpy()/float()/NumPy ops on tensors,"
    " tf.stop_gradient, casts to integer types, round/floor/ceil/argmax, tf.numpy_function,"
    " ops without a registered gradient"
)


@clause.register
def _site_mistake_clause(evidence: SiteMistake, result: CheckResult) -> str:
    cause = stated_cause(result)
    return f"{cause.culprit}: {what(cause)}"


@sentence.register
def _site_mistake(evidence: SiteMistake, result: CheckResult) -> str:
    fixed = fix(stated_cause(result))
    return _site_mistake_clause(evidence, result) + (f"; {fixed}" if fixed else "")


@sentence.register
def _site_correct(evidence: SiteCorrect, result: CheckResult) -> str:
    return (f"{evidence.site}: grad_fn returns uᵀJ, checked on its own against finite"
            " differences")


@sentence.register
def _site_unchecked(evidence: SiteUnchecked, result: CheckResult) -> str:
    return f"custom_gradient {evidence.name} could not be checked on its own: {evidence.error}"


@sentence.register
def _no_forward_mode(evidence: SiteNoForwardMode, result: CheckResult) -> str:
    return (f"{evidence.site}: forward mode (ForwardAccumulator) gives no JVP through it for"
            f" {result.input}: its forward and its grad_fn both leave TensorFlow (NumPy,"
            " tf.numpy_function, .numpy()), and forward mode differentiates through one of"
            " them; not a wrong gradient, but forward mode (and the jvp check) cannot be used")


@clause.register
def _cut_found_clause(evidence: CutFound, result: CheckResult) -> str:
    return what(stated_cause(result))


@sentence.register
def _cut_found(evidence: CutFound, result: CheckResult) -> str:
    cause = stated_cause(result)
    return f"{what(cause)}; {fix(cause)}"


@clause.register
def _cut_not_found_clause(evidence: CutNotFound, result: CheckResult) -> str:
    why = f" ({evidence.note})" if evidence.note else ""
    return f"could not locate where the gradient path from {result.input} is lost{why}"


@sentence.register
def _cut_not_found(evidence: CutNotFound, result: CheckResult) -> str:
    return f"{_cut_not_found_clause(evidence, result)}; usual causes: {USUAL_CAUSES}"
