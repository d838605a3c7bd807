"""The dispatcher of a cause's words (on its facts' type) and what is read from them."""

from __future__ import annotations

import functools
from typing import Any

from gradcheck.evidence.causes import Facts, Words
from gradcheck.report import Cause, CheckResult, Mistake

WhatAndFix = tuple[str, "str | None"]

# Mistakes whose words need no facts.
PLAIN: dict[Mistake, WhatAndFix] = {
    Mistake.DTYPE_MIX: (
        "the gradient mixes float32 and float64",
        "create the gradient's constants and variables in the input's dtype"
        " (tf.constant(..., dtype=upstream.dtype), tf.cast), or check with --dtype auto,"
        " which checks float32-only code in float32"),
    Mistake.VARIABLE_IN_GRAD_FN: (
        "grad_fn creates a tf.Variable on every call: the vectorised tape.jacobian"
        " (experimental_use_pfor=True, the default) then returns None without a word (or"
        " raises, on a persistent tape) while tape.gradient works, and a tf.function refuses"
        " to create it after its first call",
        "use tf.constant (or any tensor) for fixed values inside grad_fn"),
    Mistake.VARIABLE_IN_FORWARD: (
        "creates a tf.Variable in its forward pass: a tf.Variable copies its initial value, so"
        " built from the inputs outside a custom_gradient this line cuts the gradient path"
        " (tape.gradient returns None; here grad_fn alone carries the gradient), and a"
        " tf.function refuses to create variables on every call",
        "build the output from tensors (tf.stack, tf.concat) instead"),
}


@functools.singledispatch
def words(facts: Facts | None, mistake: Mistake) -> WhatAndFix:
    """What is wrong and the fix (None: no fix follows from it), from the facts."""
    if facts is None and mistake in PLAIN:
        return PLAIN[mistake]
    raise TypeError(f"no words are registered for {type(facts).__name__} ({mistake})")


@words.register
def _hand_worded(facts: Words, mistake: Mistake) -> WhatAndFix:
    return facts.what, facts.fix


# Ops whose kink is a tie among the elements they pick an extreme of (reductions, pooling).
_EXTREMES = {"Max": "maximum", "MaxPool": "maximum", "Min": "minimum"}


def kink_place(tie: bool, name: str = "") -> str:
    """Where an op's kink is: where its two inputs tie (Maximum, a comparison), where two of
    the elements it reduces tie for their maximum (reduce_max, MaxPool), or at 0."""
    extreme = _EXTREMES.get(name.split(" ", 1)[0])
    if tie and extreme is not None:
        return f"where two of the elements it reduces tie for the {extreme}"
    return "where its two inputs tie" if tie else "at 0"


def what(cause: Cause) -> str:
    """What is wrong, in words."""
    return words(cause.facts, cause.mistake)[0]


def fix(cause: Cause) -> str | None:
    """What to do about it, when that follows from the cause."""
    return words(cause.facts, cause.mistake)[1]


def stated_cause(result: CheckResult) -> Cause:
    """The cause of a finding whose evidence its cause tells (that evidence always has one)."""
    assert result.cause is not None, f"{type(result.evidence).__name__} is told by its cause"
    return result.cause


def cause_dict(cause: Cause | None) -> dict[str, Any] | None:
    """The JSON report's `cause` object."""
    if cause is None:
        return None
    said, fixed = words(cause.facts, cause.mistake)
    return {"mistake": cause.mistake, "what": said, "culprit": cause.culprit,
            "location": cause.location, "fix": fixed}
