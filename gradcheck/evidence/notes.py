"""What gradcheck has to say about how it checked (Report.notes, the mode chosen), as data:
one frozen Note subclass per kind of note. Their sentences are made in
gradcheck.render.sentences.notes."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from gradcheck.evidence.location import Location

if TYPE_CHECKING:
    from gradcheck.evidence.causes import ContractSlip


@dataclasses.dataclass(frozen=True)
class Note:
    """The base of every note; str() gives its sentence (as the table and JSON show it)."""

    def __str__(self) -> str:
        # Sentences are gradcheck.render's business, a layer above: imported when one is shown.
        from gradcheck.render.sentences.notes import note_text

        return note_text(self)


# Full or fast mode, and why (checks/mode.py).
@dataclasses.dataclass(frozen=True)
class ModeReason(Note):
    """Why full or fast mode was chosen."""


@dataclasses.dataclass(frozen=True)
class ModeAsked(ModeReason):
    """--mode `mode` was given."""

    mode: str


@dataclasses.dataclass(frozen=True)
class OverMemory(ModeReason):
    """Under --mode auto, full mode on `input` (`inputs` x `outputs` elements) would hold
    `needed` bytes, over the budget (--max-memory `budget`)."""

    input: str
    inputs: int
    outputs: int
    needed: int
    budget: int


@dataclasses.dataclass(frozen=True)
class TooSlow(ModeReason):
    """Under --mode auto, full mode would evaluate f `evaluations` times of `call_seconds`."""

    evaluations: int
    call_seconds: float


@dataclasses.dataclass(frozen=True)
class WithinBudgets(ModeReason):
    """Under --mode auto, full mode fits the memory and time budgets."""


@dataclasses.dataclass(frozen=True)
class FastModeUsed(Note):
    """Fast mode (random projections) was used, for `reason`."""

    reason: ModeReason


# The dtype the check runs and is sized in (engine/binding.py, checks/run.py).
@dataclasses.dataclass(frozen=True)
class DtypeFallback(Note):
    """`function` (or, `gradients`, its gradients) failed in `tried` with `error`: checked in
    `dtype`, the arguments' own."""

    function: str
    tried: str
    error: str | ContractSlip  # the first line of what was raised, or the grad_fn's slip
    dtype: str
    gradients: bool = False


@dataclasses.dataclass(frozen=True)
class NonFiniteInOwnDtype(Note):
    """`function`'s value (or, `gradients`, its gradient) is NaN or infinite in `dtype`, the
    arguments' own, and finite in `tried`: checked in `dtype`."""

    function: str
    tried: str
    dtype: str
    gradients: bool = False


@dataclasses.dataclass(frozen=True)
class ComputesInside(Note):
    """`function` computes in half precision `dtype` inside, with `outputs` dtype outputs."""

    function: str
    dtype: str
    outputs: str


@dataclasses.dataclass(frozen=True)
class ReturnsLower(Note):
    """`function` returns `dtype` outputs for `inputs` dtype inputs."""

    function: str
    dtype: str
    inputs: str


@dataclasses.dataclass(frozen=True)
class RoundsToFloat32(Note):
    """`function` rounds its float64 input `input` to float32 inside."""

    function: str
    input: str


# What is not checked, or checked in parts.
@dataclasses.dataclass(frozen=True)
class OutputNotChecked(Note):
    """Output `output` has no gradient: `reason` (how engine/program.py says it)."""

    output: str
    reason: str


@dataclasses.dataclass(frozen=True)
class ComplexInput(Note):
    """Complex `input`, checked as its (real, imaginary) parts."""

    input: str


@dataclasses.dataclass(frozen=True)
class PassedThrough(Note):
    """`input` is `kind` (not a float tensor): passed through, not differentiated."""

    input: str
    kind: str


@dataclasses.dataclass(frozen=True)
class NonTrainable(Note):
    """A non-trainable variable f reads: listed, not checked."""

    variable: str


@dataclasses.dataclass(frozen=True)
class LeftOut(Note):
    """--wrt `wrt` leaves `names` out."""

    wrt: str
    names: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class HessianArgumentsOnly(Note):
    """The Hessian does not move the tf.Variables `variables`."""

    variables: tuple[str, ...]


# Keras targets (targets/keras.py).
@dataclasses.dataclass(frozen=True)
class FactoryPolicy(Note):
    """The factory `factory` built its model under a float64 dtype policy (`float64`), or
    could not and was checked in its own dtypes."""

    factory: str
    float64: bool


@dataclasses.dataclass(frozen=True)
class CalledTraining(Note):
    """The layer `layer` is called with training=True."""

    layer: str


# How the gradients were taken (engine/recording.py, engine/batch.py, checks/full.py,
# checks/jacobian.py).
@dataclasses.dataclass(frozen=True)
class PointByPoint(Note):
    """Finite differences for `input` evaluated f point by point: vectorised evaluation
    raised `failed` (an exception's type), or `input` is a tf.Variable, or vectorisation is
    off."""

    input: str
    failed: str | None = None
    variable: bool = False


@dataclasses.dataclass(frozen=True)
class FreshTapes(Note):
    """The recorded tape raised `error` when asked again: a fresh tape per call."""

    error: str


@dataclasses.dataclass(frozen=True)
class WhileLoopJacobian(Note):
    """The vectorised tape.jacobian failed (`error`; None: it was not asked for) and the
    while-loop one was used; when pfor's frames tell, the op it failed to vectorise (`op`,
    its graph name `op_name`, the user's line that made it) and the error at the root."""

    error: str | None = None
    op: str | None = None
    op_name: str | None = None
    location: Location | None = None
    root: str | None = None


@dataclasses.dataclass(frozen=True)
class JacobianByRows(Note):
    """tape.jacobian failed (`error`): built from `size` one-hot VJPs."""

    error: str
    size: int


# Notes about other notes and findings.
@dataclasses.dataclass(frozen=True)
class CompiledInOwnDtype(Note):
    """The compiled check ran in `dtype`; in float64 it found `promoted` (a CheckResult: the
    evidence layer lies below the report's)."""

    dtype: str
    promoted: Any


@dataclasses.dataclass(frozen=True)
class SecondDerivatives(Note):
    """`note`, said of the check of the second derivatives."""

    note: Note


@dataclasses.dataclass(frozen=True)
class Retried(Note):
    """The results come from a new worker with vectorisation off, after `crash` (`jacobian`:
    in tape.jacobian's vectorised path, pfor)."""

    crash: str
    jacobian: bool = False
