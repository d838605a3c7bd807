"""Sentences about an input's gradient itself (raised, missing, cut, at a kink), upstreams of
ones and layers never called."""

from __future__ import annotations

from gradcheck.evidence.gradients import (
    AllOnesUpstream,
    CutPath,
    GradientRaised,
    Independent,
    Jump,
    Kink,
    UnbuiltLayer,
    UntrainedWeight,
    VariableInCall,
)
from gradcheck.render.causes import fix, kink_place, what
from gradcheck.render.causes.custom_gradients import raised_clause, raised_without_fix
from gradcheck.render.sentences.dispatch import clause, sentence
from gradcheck.report import CheckResult
from gradcheck.spelling import format_index


@clause.register
def _raised_clause(evidence: GradientRaised, result: CheckResult) -> str:
    return raised_clause(evidence, result)


# How to step around TensorFlow's own gradient of an op where it raises.
_TENSORFLOW_GRADIENT_WORKAROUNDS = {
    "GatherNd": "index so that the result keeps a dimension (tf.gather_nd(x, [[i]])[0]) or use"
                " x[i] or tf.gather",
    "EagerPyFunc": "return only floating-point values from the tf.py_function (cast integers"
                   " outside it), or give it a tf.custom_gradient",
}


@sentence.register
def _raised(evidence: GradientRaised, result: CheckResult) -> str:
    if evidence.tensorflow_op is not None:
        op = evidence.tensorflow_op
        where = f" at {result.location}" if result.location else ""
        workaround = _TENSORFLOW_GRADIENT_WORKAROUNDS.get(
            op, f"compute it without {op}, or wrap it in a tf.custom_gradient with the gradient"
                " you know")
        return (f"TensorFlow's own gradient of {op}{where} raised {evidence.error} while"
                f" computing the gradient of {result.output} with respect to {result.input}; f"
                f" has no custom gradient there, so TensorFlow's registered gradient for {op} is"
                f" at fault: {workaround}")
    said = raised_without_fix(evidence, result)
    if not evidence.dtype_mix or result.cause is None:
        return said
    return f"{said}; {fix(result.cause)}"


@sentence.register
def _independent(evidence: Independent, result: CheckResult) -> str:
    y, x = result.output, result.input
    return (f"autodiff returns None for d{y}/d{x} and finite differences agree that {y} does"
            f" not depend on {x}")


@sentence.register
def _untrained(evidence: UntrainedWeight, result: CheckResult) -> str:
    why = ("f never reads it (an unused layer, or a head not on the path?)" if evidence.never_read
           else "its path may end in an integer cast, argmax or a Python branch")
    if evidence.read_at:
        return (f"the trainable weight {result.input} is never read while the loss is computed:"
                f" its value was read once, outside the training step, at {evidence.read_at},"
                " and the step uses that stale tensor, so it gets no gradient and never trains;"
                " read the weight inside call() (the op that uses it, where it is used)")
    y = result.output
    return (f"the trainable weight {result.input} gets no gradient from {y} (None), and finite"
            f" differences agree that {y} does not depend on it here, so it never trains"
            f" through {y} (Keras: 'No gradients provided'): {why}")


@clause.register
def _cut_clause(evidence: CutPath, result: CheckResult) -> str:
    x, y = result.input, result.output
    return (f"the gradient path from {x} to {y} is cut: autodiff returns None, but finite"
            f" differences show {y} depends on {x} (|dy/dx| up to {evidence.magnitude:.3g})")


@sentence.register
def _cut(evidence: CutPath, result: CheckResult) -> str:
    said = _cut_clause(evidence, result)
    if evidence.origin is None:
        return said
    return f"{said}; {result.output} is a {evidence.origin} value, computed outside TensorFlow"


@clause.register
def _kink_clause(evidence: Kink, result: CheckResult) -> str:
    return (f"{result.output} is not differentiable in {result.input} at this point"
            f" ({evidence.count} element(s), e.g. {format_index(evidence.index)}): autodiff"
            f" gives {evidence.autodiff:.6g}, finite differences across the kink"
            f" {evidence.across:.6g}")


@sentence.register
def _kink(evidence: Kink, result: CheckResult) -> str:
    site = evidence.site
    at = (f"; the kink: {site.name} {kink_place(site.tie, site.name)} at {site.location}"
          if site else "")
    if evidence.weight:  # a weight's point is where training is, not the user's choice
        return (f"{_kink_clause(evidence, result)}{at}; harmless for training: autodiff gives"
                " one side's derivative, as every optimiser step uses it; only finite"
                " differences, whose step crosses the kink, cannot judge this element")
    return f"{_kink_clause(evidence, result)}{at}; move the point away from the kink"


@clause.register
def _jump_clause(evidence: Jump, result: CheckResult) -> str:
    return (f"{result.output} is discontinuous in {result.input} at this point"
            f" ({evidence.count} element(s), e.g. {format_index(evidence.index)}): finite"
            f" differences across the jump give {evidence.across:.6g}, which grows as the step"
            f" shrinks; autodiff gives one side's derivative, {evidence.autodiff:.6g}")


@sentence.register
def _jump(evidence: Jump, result: CheckResult) -> str:
    site = evidence.site
    cut = "where it wraps" if site and site.name.startswith("FloorMod") else "its branch cut"
    at = (f"; the discontinuity: {site.name} at {site.location}, {cut}" if site
          else "; e.g. a branch cut (angle, atan2, log or sqrt of a complex number across the"
          " negative real axis) or a wrap (floormod)")
    return (f"{_jump_clause(evidence, result)}{at}; the gradient is right on either side:"
            " move the point off the discontinuity")


@clause.register
def _all_ones_clause(evidence: AllOnesUpstream, result: CheckResult) -> str:
    return (f"the upstream for {result.output} is all ones: uᵀJ is then the column sums of J,"
            " which hides transposed or mixed-up rows")


@sentence.register
def _all_ones(evidence: AllOnesUpstream, result: CheckResult) -> str:
    return f"{_all_ones_clause(evidence, result)}; a random upstream (the default) catches them"


NO_GRADIENTS = "Keras reports 'No gradients provided for any variable' for such weights"


@clause.register
def _unbuilt_clause(evidence: UnbuiltLayer, result: CheckResult) -> str:
    return (f"{evidence.function} never calls its layer {evidence.layer}, so the layer has no"
            f" weights yet and none of them would ever train ({NO_GRADIENTS})")


@sentence.register
def _unbuilt(evidence: UnbuiltLayer, result: CheckResult) -> str:
    return (f"{_unbuilt_clause(evidence, result)}; an unused layer, or a head not on the path"
            " to the output?")


@clause.register
def _variable_in_call_clause(evidence: VariableInCall, result: CheckResult) -> str:
    made = f" {evidence.made} layer, and with it new tf.Variables" if evidence.made else (
        " tf.Variable")
    return (f"layer {evidence.layer} ({evidence.layer_class}) creates a new{made}"
            f" ({', '.join(evidence.variables)}) every time it is called")


@sentence.register
def _variable_in_call(evidence: VariableInCall, result: CheckResult) -> str:
    cause = result.cause
    assert cause is not None
    return f"{what(cause)}; fix: {fix(cause)}"
