"""What gradcheck has to say about how it checked (Report.notes, the mode chosen): one frozen
Note subclass per kind of note, each saying itself (its `words`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from gradcheck.evidence.finding import StatedCause
from gradcheck.evidence.location import Location
from gradcheck.spelling import format_size

RETRY_NOTE = ("these results come from a new worker process with vectorisation off"
              " (no pfor, no tf.vectorized_map)")
SIZING = "finite-difference steps and tolerances are"
OWN_CALLS = ("so your own tape.jacobian and tape.batch_jacobian calls on this function need"
             " experimental_use_pfor=False too")


@dataclasses.dataclass(frozen=True)
class Note:
    """The base of every note; str() gives its words (as the table and JSON show it)."""

    def words(self) -> str:
        """What the note says; every kind of note says its own."""
        raise NotImplementedError(f"{type(self).__name__} has no words")

    def __str__(self) -> str:
        return self.words()


# Full or fast mode, and why (kinds/jacobian/mode.py).
@dataclasses.dataclass(frozen=True)
class ModeReason(Note):
    """Why full or fast mode was chosen."""


@dataclasses.dataclass(frozen=True)
class ModeAsked(ModeReason):
    """--mode `mode` was given."""

    mode: str

    def words(self) -> str:
        return "--mode fast was asked for" if self.mode == "fast" else f"--mode {self.mode}"


@dataclasses.dataclass(frozen=True)
class OverMemory(ModeReason):
    """Under --mode auto, full mode on `input` (`inputs` x `outputs` elements) would hold
    `needed` bytes, over the budget (--max-memory `budget`)."""

    input: str
    inputs: int
    outputs: int
    needed: int
    budget: int

    def words(self) -> str:
        return (f"--mode auto chose it: full mode on {self.input} ({self.inputs} inputs x"
                f" {self.outputs} outputs) would hold about {format_size(self.needed)} of"
                f" Jacobian-sized arrays, over the memory budget (--max-memory"
                f" {format_size(self.budget)})")


@dataclasses.dataclass(frozen=True)
class TooSlow(ModeReason):
    """Under --mode auto, full mode would evaluate f `evaluations` times of `call_seconds`."""

    evaluations: int
    call_seconds: float

    def words(self) -> str:
        return (f"--mode auto chose it: full mode would evaluate f {self.evaluations} times,"
                f" about {self.evaluations * self.call_seconds:.0f} s at"
                f" {self.call_seconds * 1e3:.2g} ms per call (--mode full to insist)")


@dataclasses.dataclass(frozen=True)
class WithinBudgets(ModeReason):
    """Under --mode auto, full mode fits the memory and time budgets."""

    def words(self) -> str:
        return "within the memory and time budgets"


@dataclasses.dataclass(frozen=True)
class FastModeUsed(Note):
    """Fast mode (random projections) was used, for `reason`."""

    reason: ModeReason

    def words(self) -> str:
        return f"fast mode (random projections) was used: {self.reason.words()}"


# The dtype the check runs and is sized in (engine/binding.py, checks/run.py).
@dataclasses.dataclass(frozen=True)
class DtypeFallback(Note):
    """`function` (or, `gradients`, its gradients) failed in `tried` with `error`: checked in
    `dtype`, the arguments' own."""

    function: str
    tried: str
    error: str | StatedCause  # the first line of what was raised, or the grad_fn's dtype slip
    dtype: str
    gradients: bool = False

    def words(self) -> str:
        refused = (f"the gradients of {self.function} cannot be taken in {self.tried}"
                   if self.gradients else f"{self.function} does not accept {self.tried} inputs")
        error = self.error if isinstance(self.error, str) else self.error.what
        return (f"{refused} ({error}); checked in {self.dtype}, the arguments' own dtype,"
                f" with {self.dtype} tolerances")


@dataclasses.dataclass(frozen=True)
class NonFiniteInOwnDtype(Note):
    """`function`'s value (or, `gradients`, its gradient) is NaN or infinite in `dtype`, the
    arguments' own, and finite in `tried`: checked in `dtype`."""

    function: str
    tried: str
    dtype: str
    gradients: bool = False

    def words(self) -> str:
        which = f"the gradient of {self.function}" if self.gradients else self.function
        return (f"{which} is NaN or infinite in {self.dtype}, the arguments' own dtype, and"
                f" finite in {self.tried}: checked in {self.dtype}, as it runs for you, with"
                f" {self.dtype} tolerances (--dtype {self.tried}, dtype=\"{self.tried}\" in the"
                f" Python API, checks it in {self.tried})")


@dataclasses.dataclass(frozen=True)
class ComputesInside(Note):
    """`function` computes in half precision `dtype` inside, with `outputs` dtype outputs."""

    function: str
    dtype: str
    outputs: str

    def words(self) -> str:
        return (f"{self.function} computes in {self.dtype} inside (its outputs are"
                f" {self.outputs}): {SIZING} {self.dtype}'s")


@dataclasses.dataclass(frozen=True)
class ReturnsLower(Note):
    """`function` returns `dtype` outputs for `inputs` dtype inputs."""

    function: str
    dtype: str
    inputs: str

    def words(self) -> str:
        return (f"{self.function} returns {self.dtype} outputs for {self.inputs} inputs:"
                f" {SIZING} {self.dtype}'s")


@dataclasses.dataclass(frozen=True)
class RoundsToFloat32(Note):
    """`function` rounds its float64 input `input` to float32 inside."""

    function: str
    input: str

    def words(self) -> str:
        return (f"{self.function} rounds its float64 input {self.input} to float32 inside (a"
                f" float32 Keras Input layer or a tf.cast?): {SIZING} float32's")


# What is not checked, or checked in parts.
@dataclasses.dataclass(frozen=True)
class OutputNotChecked(Note):
    """Output `output` has no gradient: `reason` (how engine/program.py says it)."""

    output: str
    reason: str

    def words(self) -> str:
        return f"output {self.output} {self.reason}: not checked"


@dataclasses.dataclass(frozen=True)
class ComplexInput(Note):
    """Complex `input`, checked as its (real, imaginary) parts."""

    input: str

    def words(self) -> str:
        return (f"{self.input} is complex: checked as its (real, imaginary) parts, index"
                " [..., 0] and [..., 1]; TensorFlow's gradient for it is ∂L/∂Re + i ∂L/∂Im"
                " (docs/vjp.md)")


@dataclasses.dataclass(frozen=True)
class PassedThrough(Note):
    """`input` is `kind` (not a float tensor): passed through, not differentiated."""

    input: str
    kind: str

    def words(self) -> str:
        return f"{self.input} is {self.kind}: passed through, not differentiated"


@dataclasses.dataclass(frozen=True)
class NonTrainable(Note):
    """A non-trainable variable f reads: listed, not checked."""

    variable: str

    def words(self) -> str:
        return f"{self.variable} is a non-trainable variable f reads: listed, not checked"


@dataclasses.dataclass(frozen=True)
class LeftOut(Note):
    """--wrt `wrt` leaves `names` out."""

    wrt: str
    names: tuple[str, ...]

    def words(self) -> str:
        return f"--wrt {self.wrt}: {', '.join(self.names)} not differentiated"


@dataclasses.dataclass(frozen=True)
class HessianArgumentsOnly(Note):
    """The Hessian does not move the tf.Variables `variables`."""

    variables: tuple[str, ...]

    def words(self) -> str:
        return (f"the Hessian is with respect to the arguments only:"
                f" {', '.join(self.variables)} (tf.Variables) are not moved for it")


# Keras targets (targets/keras.py).
@dataclasses.dataclass(frozen=True)
class FactoryPolicy(Note):
    """The factory `factory` built its model under a float64 dtype policy (`float64`), or
    could not and was checked in its own dtypes."""

    factory: str
    float64: bool

    def words(self) -> str:
        if self.float64:
            return (f"{self.factory}() built its model under a float64 dtype policy, so finite"
                    " differences are precise")
        return (f"{self.factory}() does not build or run under a float64 dtype policy: checked"
                " in its own dtypes, with their tolerances")


@dataclasses.dataclass(frozen=True)
class CalledTraining(Note):
    """The layer `layer` is called with training=True."""

    layer: str

    def words(self) -> str:
        return f"{self.layer} is called with training=True (--training)"


# How the gradients were taken (engine/recording.py, engine/batch.py, kinds/jacobian/full.py,
# kinds/jacobian/check.py).
@dataclasses.dataclass(frozen=True)
class PointByPoint(Note):
    """Finite differences for `input` evaluated f point by point: vectorised evaluation
    raised `failed` (an exception's type and first line; `at`, the user's line it came from,
    if any), or `input` is a tf.Variable, or vectorisation is off."""

    input: str
    failed: str | None = None
    variable: bool = False
    at: Location | None = None

    def words(self) -> str:
        if self.failed is not None:
            where = f" at {self.at}" if self.at is not None else ""
            why = (f"tf.vectorized_map could not run f on many points at once: {self.failed}"
                   f"{where}; the verdicts are the same, only slower")
        else:
            why = f"{self.input} is a tf.Variable" if self.variable else "vectorisation is off"
        return f"finite differences for {self.input} evaluated f point by point ({why})"


@dataclasses.dataclass(frozen=True)
class FreshTapes(Note):
    """The recorded tape raised `error` when asked again: a fresh tape per call."""

    error: str

    def words(self) -> str:
        return (f"the recorded tape could not give the gradient again ({self.error}); gradients"
                " were taken on a fresh tape per call")


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

    def words(self) -> str:
        if self.error is None:
            return "tape.jacobian ran without vectorisation (experimental_use_pfor=False)"
        if self.op is None:
            return (f"the vectorised tape.jacobian failed ({self.error}); the while-loop"
                    " tape.jacobian(experimental_use_pfor=False) was used")
        at = f" at {self.location}" if self.location is not None else ""
        root = f": {self.root.rstrip('.')}" if self.root and self.root != self.error else ""
        name = self.op_name or ""
        if name.startswith("gradients/") and "_grad/" in name:
            name += f", in the gradient of {name.removeprefix('gradients/').split('_grad/')[0]}"
            at = f", made at {self.location}" if self.location is not None else ""
        return (f"tape.jacobian(..., experimental_use_pfor=True) failed: pfor could not"
                f" vectorise op {self.op} ({name}{at}){root}; gradcheck used the while loop,"
                f" experimental_use_pfor=False, {OWN_CALLS}")


@dataclasses.dataclass(frozen=True)
class JacobianByRows(Note):
    """tape.jacobian failed (`error`): built from `size` one-hot VJPs."""

    error: str
    size: int

    def words(self) -> str:
        return (f"tape.jacobian failed ({self.error}); the Jacobian was built from {self.size}"
                " VJPs with one-hot upstreams, each on a fresh tape")


# Notes about other notes and findings.
@dataclasses.dataclass(frozen=True)
class CompiledInOwnDtype(Note):
    """The compiled check ran in `dtype`; in float64 it found `promoted` (a CheckResult: the
    evidence layer lies below the report's)."""

    dtype: str
    promoted: Any

    def words(self) -> str:
        first = self.promoted
        return (f"the compiled check ran in {self.dtype}, the arguments' own dtype, because in"
                f" float64 (gradcheck's promotion) it found {first.status}: {first.headline}")


@dataclasses.dataclass(frozen=True)
class SecondDerivatives(Note):
    """`note`, said of the check of the second derivatives."""

    note: Note

    def words(self) -> str:
        return f"second derivatives: {self.note.words()}"


@dataclasses.dataclass(frozen=True)
class Retried(Note):
    """The results come from a new worker with vectorisation off, after `crash` (`jacobian`:
    in tape.jacobian's vectorised path, pfor)."""

    crash: str
    jacobian: bool = False

    def words(self) -> str:
        if not self.jacobian:
            return f"{self.crash}; {RETRY_NOTE}"
        return (f"{self.crash}; {RETRY_NOTE}: tape.jacobian(..., experimental_use_pfor=True)"
                f" crashes TensorFlow on this function where the while loop works, {OWN_CALLS}")
