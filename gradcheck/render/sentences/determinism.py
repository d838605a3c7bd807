"""Sentences of the nondeterminism check."""

from __future__ import annotations

from gradcheck.evidence.determinism import BackwardNondeterministic, Nondeterministic
from gradcheck.render.causes import fix, stated_cause, what
from gradcheck.render.sentences.dispatch import clause, sentence
from gradcheck.report import CheckResult


@clause.register
def _changed(evidence: Nondeterministic, result: CheckResult) -> str:
    return (f"{evidence.function} returned different values on two calls with the same inputs:"
            f" {what(stated_cause(result))}")


@sentence.register
def _changed_and_why(evidence: Nondeterministic, result: CheckResult) -> str:
    if evidence.under_tape:
        cause = stated_cause(result)
        return (f"{evidence.function} returns other values under a GradientTape than without"
                f" one (each the same on every call): {what(cause)}; finite differences"
                " (without a tape) and autodiff (under one) then see different functions, so"
                f" no gradient verdict is given; fix: {fix(cause)}")
    if evidence.created_variables:
        at = f", the first at {result.location}" if result.location else ""
        return (f"{_changed(evidence, result)}; {evidence.function} creates"
                f" {evidence.created_variables} variable(s) on every call{at} (Keras layers"
                " built inside f get new random weights each time), which makes finite"
                " differences meaningless, so no gradient verdict is given: create them once,"
                " outside f")
    said = (f"{_changed(evidence, result)}; random ops (tf.random.*, dropout) or state that"
            " changes between calls make finite differences meaningless, so no gradient"
            " verdict is given: fix the randomness (tf.random.stateless_*) or check a"
            " deterministic version")
    if evidence.random_layers:
        return (f"{said}; its random layers: {', '.join(evidence.random_layers)} (check in"
                " inference mode, without --training, or fix their seeds)")
    state = evidence.state
    if state is not None:
        kind = "a variable write" if state.variable_write else "a random op"
        also = f" (and {state.others} more)" if state.others > 0 else ""
        said = f"{said}; the state that changes: {kind}, {state.name}, at {state.location}{also}"
    return said + _recomputed(evidence)


def _recomputed(evidence: Nondeterministic) -> str:
    op = evidence.recomputed
    if op is None:
        return ""
    return (f"; and a known pitfall: the random op {op.name} at {op.location} is inside"
            f" tf.recompute_grad, {RECOMPUTED}")


RECOMPUTED = ("whose backward pass runs it again and draws a new mask, so the gradient is"
              " that of another function than the value computed: pass it a seed it reuses"
              " (tf.random.stateless_* or tf.nn.experimental.stateless_dropout with a seed"
              " argument), or keep dropout and other random ops outside tf.recompute_grad")


@sentence.register
def _backward_changed(evidence: BackwardNondeterministic, result: CheckResult) -> str:
    said = (f"the gradient of {evidence.function} for {evidence.source}, computed twice from"
            " the same forward pass, is not bitwise equal, so no gradient verdict is given")
    if evidence.op is None:
        return f"{said}: no op in its traced VJP explains it"
    at = f" at {result.location}" if result.location else ""
    also = f" (also: {', '.join(evidence.others)})" if evidence.others else ""
    if evidence.recomputed:
        return (f"{said}: a random op, {evidence.op}{at}{also}, is inside tf.recompute_grad,"
                f" {RECOMPUTED}")
    if evidence.random:
        return (f"{said}: a random op in a gradient, {evidence.op}{at}{also} (a grad_fn that"
                " draws noise gives another gradient on every call: draw it once, or with"
                " tf.random.stateless_* and a fixed seed)")
    return (f"{said}: its backward op {evidence.op}{at}{also} has a nondeterministic GPU"
            " kernel (atomic additions, TF32 matmuls); call"
            " tf.config.experimental.enable_op_determinism() for repeatable gradients")
