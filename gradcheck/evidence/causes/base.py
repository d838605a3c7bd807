"""The base of a cause's facts, which say what is wrong and the fix, and the words of the
mistakes that need no facts."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence.causes.mistakes import Mistake

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


def plain_words(mistake: Mistake) -> WhatAndFix:
    """What is wrong and the fix of a cause without facts: its mistake alone says them."""
    if mistake not in PLAIN:
        raise NotImplementedError(f"{mistake} has no words without facts")
    return PLAIN[mistake]


@dataclasses.dataclass(frozen=True)
class Facts:
    """The base of every cause's facts: each family says what is wrong and the fix."""

    def words(self, mistake: Mistake) -> WhatAndFix:
        """What is wrong and the fix (None: no fix follows from it), for `mistake`."""
        raise NotImplementedError(f"{type(self).__name__} has no words ({mistake})")


@dataclasses.dataclass(frozen=True)
class Words(Facts):
    """Words given as they are: a hand-built cause (renderer tests, plugins), never the core."""

    what: str
    fix: str | None = None

    def words(self, mistake: Mistake) -> WhatAndFix:
        return self.what, self.fix
