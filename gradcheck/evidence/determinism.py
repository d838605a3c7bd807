"""Evidence of the nondeterminism check: two calls of f with the same inputs disagreed."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence, Location, internal


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
