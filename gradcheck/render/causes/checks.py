"""The words of causes the checks name: a kink, compiled VJPs, forward mode, second
derivatives, nondeterminism, an unused layer."""

from __future__ import annotations

from gradcheck.evidence.causes import (
    Compiled,
    CreatedInCall,
    Kinked,
    NoForwardRule,
    NoSecondOrderGradient,
    NotCompiled,
    OutputChanged,
    SecondOrder,
    UnusedLayer,
)
from gradcheck.render.causes.dispatch import WhatAndFix, kink_place, what, words
from gradcheck.report import Mistake
from gradcheck.spelling import format_index

UNTRACEABLE_FIX = ("create variables once, outside f (or in a Keras layer's build); keep tensors"
                   " in TensorFlow (no .numpy(), float() or Python `if` on tensor values)")
NO_FORWARD_RULE = ("tf.autodiff.ForwardAccumulator gives no tangent through it, so forward"
                   " mode says 0 where reverse mode does not")
FORWARD_FIX = ("a gap in TensorFlow, not in your gradient: reverse mode (what training uses) is"
               " checked by the other checks; for JVPs through it, use two reverse passes"
               " (the transpose of tape.gradient) instead of ForwardAccumulator")
SECOND_ORDER_FIX = (
    "write grad_fn in TensorFlow ops of x and upstream (no .numpy(), NumPy, tf.Variable or"
    " tf.stop_gradient), or nest a tf.custom_gradient for the second order")
SECOND_ORDER = {
    Mistake.ASYMMETRIC: "has a second derivative that is not symmetric (a second derivative of"
                        " a twice-differentiable f is)",
    Mistake.SECOND_ORDER_NONE: "is not differentiable (the gradient of its result is None)",
    Mistake.SECOND_ORDER_RAISED: "raises when differentiated again",
    Mistake.WRONG_SHAPE: "has a second derivative of the wrong shape",
}


@words.register
def _kinked(facts: Kinked, mistake: Mistake) -> WhatAndFix:
    return f"{facts.name} {kink_place(facts.tie, facts.name)}", None


@words.register
def _compiled(facts: Compiled, mistake: Mistake) -> WhatAndFix:
    mode = facts.mode
    if mistake == Mistake.COMPILED_VALUES:
        return f"f's values differ under {mode}", None
    if mistake == Mistake.COMPILED_NON_FINITE:
        return f"{mode} gives non-finite values", None
    if mistake == Mistake.COMPILED_NONE:
        return ("None eagerly, not under " if facts.eagerly else "None under ") + mode, None
    return f"{mode} differs from eager", None


@words.register
def _not_compiled(facts: NotCompiled, mistake: Mistake) -> WhatAndFix:
    said = facts.error if facts.ops is None else f"XLA has no kernel for {facts.ops}"
    return str(said), UNTRACEABLE_FIX if mistake == Mistake.UNTRACEABLE else None


@words.register
def _no_forward_rule(facts: NoForwardRule, mistake: Mistake) -> WhatAndFix:
    why = (NO_FORWARD_RULE if facts.missing is None else
           f"TensorFlow has no gradient for {facts.missing}, which its forward mode needs")
    return (f"TensorFlow has no forward-mode rule for {', '.join(facts.ops)} ({why})",
            FORWARD_FIX)


@words.register
def _second_order(facts: SecondOrder, mistake: Mistake) -> WhatAndFix:
    if facts.first is not None:
        return f"has a second derivative that {what(facts.first)}", SECOND_ORDER_FIX
    return (SECOND_ORDER.get(mistake, "has a second derivative that has wrong values"),
            SECOND_ORDER_FIX)


@words.register
def _no_second_order_gradient(facts: NoSecondOrderGradient, mistake: Mistake) -> WhatAndFix:
    op = facts.op
    return (f"TensorFlow has no gradient for {facts.gradient_op}, the gradient of {op}: the"
            f" second derivative through {op} is missing (TensorFlow's missing gradient, not"
            " your code's)",
            f"compute {op} with ops that have second derivatives (e.g. for a resize:"
            " tf.nn.conv2d_transpose or tf.nn.avg_pool2d, or a tf.custom_gradient whose grad_fn"
            " is written in differentiable ops)")


@words.register
def _output_changed(facts: OutputChanged, mistake: Mistake) -> WhatAndFix:
    if facts.output is None:
        return "its outputs changed structure", None
    if facts.shapes is not None:
        then, now = facts.shapes
        return f"{facts.output} changed from shape {then} to {now}", None
    at = f" at {format_index(facts.index)}" if facts.index else ""
    fix = ("make f compute the same values whether or not a GradientTape watches its inputs"
           " (a library's sampler may take another path under a tape: to check the rest of f,"
           " pass the sample in as an input)") if mistake is Mistake.TAPE_DEPENDENT else None
    return f"{facts.output} differs by up to {facts.largest:.3g}{at}", fix


@words.register
def _unused_layer(facts: UnusedLayer, mistake: Mistake) -> WhatAndFix:
    return f"{facts.layer} is never called", None


@words.register
def _created_in_call(facts: CreatedInCall, mistake: Mistake) -> WhatAndFix:
    names = ", ".join(facts.variables)
    consequence = (" so the variable a training step updates is not the one the next call reads"
                   " (Keras: 'Gradients do not exist for variables', or a weight that never"
                   " changes)")
    if facts.made is not None:
        return (f"{facts.layer}.call constructs a new {facts.made} layer, and with it new"
                f" tf.Variables ({names}), every time it is called,{consequence}",
                f"construct the {facts.made} layer(s) once, in {facts.layer}.__init__ (self.…"
                " = ...), and only call them in call")
    return (f"{facts.layer}.call creates a new tf.Variable ({names}) every time it is called,"
            f"{consequence}",
            f"create it once, in {facts.layer}.build (or __init__) with self.add_weight, and"
            " only read it in call")
