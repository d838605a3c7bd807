"""Evidence of the nondeterminism check: two calls of f with the same inputs disagreed."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence, Finding, Location, internal
from gradcheck.evidence.finding import stated_cause

RECOMPUTED = ("whose backward pass runs it again and draws a new mask, so the gradient is"
              " that of another function than the value computed: pass it a seed it reuses"
              " (tf.random.stateless_* or tf.nn.experimental.stateless_dropout with a seed"
              " argument), or keep dropout and other random ops outside tf.recompute_grad")


@dataclasses.dataclass(frozen=True)
class ChangingState:
    """The first located op whose state changes between calls: a variable write (else a
    random op) named `name` at `location`, and how many other such ops there are."""

    variable_write: bool
    name: str
    location: Location
    others: int = 0


@dataclasses.dataclass(frozen=True)
class Nondeterministic(Evidence):
    """`function` returned other values on a second call (what changed: the finding's
    cause), and what changes, when known: its random Keras layers, or the state an op
    changes; or (`under_tape`) the same values on every call without a GradientTape and
    others under one."""

    function: str = internal("")
    random_layers: tuple[str, ...] = internal(())
    state: ChangingState | None = internal(None)
    under_tape: bool = internal(False)
    created_variables: int = internal(0)  # on every call, the first at the finding's line
    # A random op inside tf.recompute_grad, drawn again by its backward pass.
    recomputed: ChangingState | None = internal(None)

    def clause(self, result: Finding) -> str:
        return (f"{self.function} returned different values on two calls with the same inputs:"
                f" {stated_cause(result).what}")

    def words(self, result: Finding) -> str:
        if self.under_tape:
            cause = stated_cause(result)
            return (f"{self.function} returns other values under a GradientTape than without"
                    f" one (each the same on every call): {cause.what}; finite differences"
                    " (without a tape) and autodiff (under one) then see different functions,"
                    f" so no gradient verdict is given; fix: {cause.fix}")
        if self.created_variables:
            at = f", the first at {result.location}" if result.location else ""
            return (f"{self.clause(result)}; {self.function} creates"
                    f" {self.created_variables} variable(s) on every call{at} (Keras layers"
                    " built inside f get new random weights each time), which makes finite"
                    " differences meaningless, so no gradient verdict is given: create them"
                    " once, outside f")
        said = (f"{self.clause(result)}; random ops (tf.random.*, dropout) or state that"
                " changes between calls make finite differences meaningless, so no gradient"
                " verdict is given: fix the randomness (tf.random.stateless_*) or check a"
                " deterministic version")
        if self.random_layers:
            return (f"{said}; its random layers: {', '.join(self.random_layers)} (check in"
                    " inference mode, without --training, or fix their seeds)")
        state = self.state
        if state is not None:
            kind = "a variable write" if state.variable_write else "a random op"
            also = f" (and {state.others} more)" if state.others > 0 else ""
            said = (f"{said}; the state that changes: {kind}, {state.name}, at"
                    f" {state.location}{also}")
        return said + self._recomputed()

    def _recomputed(self) -> str:
        op = self.recomputed
        if op is None:
            return ""
        return (f"; and a known pitfall: the random op {op.name} at {op.location} is inside"
                f" tf.recompute_grad, {RECOMPUTED}")


@dataclasses.dataclass(frozen=True)
class BackwardNondeterministic(Evidence):
    """The VJP of `function` for `source`, computed twice from the same forward pass, was not
    bitwise equal; `op`: the backward op that explains it (a random op in a gradient, else an
    op whose GPU kernel is nondeterministic), `random` telling which; `others`: more such
    ops."""

    function: str = internal("")
    source: str = ""
    op: str | None = None
    random: bool = False
    others: tuple[str, ...] = ()
    recomputed: bool = False  # the random op is tf.recompute_grad's recomputation of f

    def words(self, result: Finding) -> str:
        said = (f"the gradient of {self.function} for {self.source}, computed twice from"
                " the same forward pass, is not bitwise equal, so no gradient verdict is given")
        if self.op is None:
            return f"{said}: no op in its traced VJP explains it"
        at = f" at {result.location}" if result.location else ""
        also = f" (also: {', '.join(self.others)})" if self.others else ""
        if self.recomputed:
            return (f"{said}: a random op, {self.op}{at}{also}, is inside tf.recompute_grad,"
                    f" {RECOMPUTED}")
        if self.random:
            return (f"{said}: a random op in a gradient, {self.op}{at}{also} (a grad_fn that"
                    " draws noise gives another gradient on every call: draw it once, or with"
                    " tf.random.stateless_* and a fixed seed)")
        return (f"{said}: its backward op {self.op}{at}{also} has a nondeterministic GPU"
                " kernel (atomic additions, TF32 matmuls); call"
                " tf.config.experimental.enable_op_determinism() for repeatable gradients")
