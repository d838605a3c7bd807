"""The sentence of each note (gradcheck.evidence.notes): Report.notes and the mode reasons."""

from __future__ import annotations

import functools

from gradcheck.evidence.notes import (
    CalledTraining,
    CompiledInOwnDtype,
    ComplexInput,
    ComputesInside,
    DtypeFallback,
    FactoryPolicy,
    FastModeUsed,
    FreshTapes,
    HessianArgumentsOnly,
    JacobianByRows,
    LeftOut,
    ModeAsked,
    NonFiniteInOwnDtype,
    NonTrainable,
    Note,
    OutputNotChecked,
    OverMemory,
    PassedThrough,
    PointByPoint,
    Retried,
    ReturnsLower,
    RoundsToFloat32,
    SecondDerivatives,
    TooSlow,
    WhileLoopJacobian,
    WithinBudgets,
)
from gradcheck.render.causes import what
from gradcheck.report import Cause, Mistake
from gradcheck.spelling import format_size

RETRY_NOTE = ("these results come from a new worker process with vectorisation off"
              " (no pfor, no tf.vectorized_map)")
SIZING = "finite-difference steps and tolerances are"
OWN_CALLS = ("so your own tape.jacobian and tape.batch_jacobian calls on this function need"
             " experimental_use_pfor=False too")


@functools.singledispatch
def note_text(note: Note | str) -> str:
    """What a note says (a hand-built report's note may be the text itself)."""
    if isinstance(note, str):
        return note
    raise TypeError(f"no sentence is registered for {type(note).__name__}")


@note_text.register
def _mode_asked(note: ModeAsked) -> str:
    return "--mode fast was asked for" if note.mode == "fast" else f"--mode {note.mode}"


@note_text.register
def _over_memory(note: OverMemory) -> str:
    return (f"--mode auto chose it: full mode on {note.input} ({note.inputs} inputs x"
            f" {note.outputs} outputs) would hold about {format_size(note.needed)} of"
            f" Jacobian-sized arrays, over the memory budget (--max-memory"
            f" {format_size(note.budget)})")


@note_text.register
def _too_slow(note: TooSlow) -> str:
    return (f"--mode auto chose it: full mode would evaluate f {note.evaluations} times, about"
            f" {note.evaluations * note.call_seconds:.0f} s at {note.call_seconds * 1e3:.2g} ms"
            " per call (--mode full to insist)")


@note_text.register
def _within_budgets(note: WithinBudgets) -> str:
    return "within the memory and time budgets"


@note_text.register
def _fast_mode_used(note: FastModeUsed) -> str:
    return f"fast mode (random projections) was used: {note_text(note.reason)}"


@note_text.register
def _dtype_fallback(note: DtypeFallback) -> str:
    refused = (f"the gradients of {note.function} cannot be taken in {note.tried}"
               if note.gradients else f"{note.function} does not accept {note.tried} inputs")
    error = note.error if isinstance(note.error, str) else what(
        Cause(Mistake.DTYPE, facts=note.error))
    return (f"{refused} ({error}); checked in {note.dtype}, the arguments' own dtype,"
            f" with {note.dtype} tolerances")


@note_text.register
def _non_finite_in_own_dtype(note: NonFiniteInOwnDtype) -> str:
    which = f"the gradient of {note.function}" if note.gradients else note.function
    return (f"{which} is NaN or infinite in {note.dtype}, the arguments' own dtype, and finite"
            f" in {note.tried}: checked in {note.dtype}, as it runs for you, with {note.dtype}"
            f" tolerances (--dtype {note.tried}, dtype=\"{note.tried}\" in the Python API,"
            f" checks it in {note.tried})")


@note_text.register
def _computes_inside(note: ComputesInside) -> str:
    return (f"{note.function} computes in {note.dtype} inside (its outputs are {note.outputs}):"
            f" {SIZING} {note.dtype}'s")


@note_text.register
def _returns_lower(note: ReturnsLower) -> str:
    return (f"{note.function} returns {note.dtype} outputs for {note.inputs} inputs: {SIZING}"
            f" {note.dtype}'s")


@note_text.register
def _rounds_to_float32(note: RoundsToFloat32) -> str:
    return (f"{note.function} rounds its float64 input {note.input} to float32 inside (a"
            f" float32 Keras Input layer or a tf.cast?): {SIZING} float32's")


@note_text.register
def _output_not_checked(note: OutputNotChecked) -> str:
    return f"output {note.output} {note.reason}: not checked"


@note_text.register
def _complex_input(note: ComplexInput) -> str:
    return (f"{note.input} is complex: checked as its (real, imaginary) parts, index [..., 0]"
            " and [..., 1]; TensorFlow's gradient for it is ∂L/∂Re + i ∂L/∂Im (docs/vjp.md)")


@note_text.register
def _passed_through(note: PassedThrough) -> str:
    return f"{note.input} is {note.kind}: passed through, not differentiated"


@note_text.register
def _non_trainable(note: NonTrainable) -> str:
    return f"{note.variable} is a non-trainable variable f reads: listed, not checked"


@note_text.register
def _left_out(note: LeftOut) -> str:
    return f"--wrt {note.wrt}: {', '.join(note.names)} not differentiated"


@note_text.register
def _hessian_arguments_only(note: HessianArgumentsOnly) -> str:
    return (f"the Hessian is with respect to the arguments only: {', '.join(note.variables)}"
            " (tf.Variables) are not moved for it")


@note_text.register
def _factory_policy(note: FactoryPolicy) -> str:
    if note.float64:
        return (f"{note.factory}() built its model under a float64 dtype policy, so finite"
                " differences are precise")
    return (f"{note.factory}() does not build or run under a float64 dtype policy: checked in"
            " its own dtypes, with their tolerances")


@note_text.register
def _called_training(note: CalledTraining) -> str:
    return f"{note.layer} is called with training=True (--training)"


@note_text.register
def _point_by_point(note: PointByPoint) -> str:
    why = (f"vectorised evaluation failed ({note.failed})" if note.failed is not None else
           f"{note.input} is a tf.Variable" if note.variable else "vectorisation is off")
    return f"finite differences for {note.input} evaluated f point by point ({why})"


@note_text.register
def _fresh_tapes(note: FreshTapes) -> str:
    return (f"the recorded tape could not give the gradient again ({note.error}); gradients"
            " were taken on a fresh tape per call")


@note_text.register
def _while_loop_jacobian(note: WhileLoopJacobian) -> str:
    if note.error is None:
        return "tape.jacobian ran without vectorisation (experimental_use_pfor=False)"
    if note.op is None:
        return (f"the vectorised tape.jacobian failed ({note.error}); the while-loop"
                " tape.jacobian(experimental_use_pfor=False) was used")
    at = f" at {note.location}" if note.location is not None else ""
    root = f": {note.root.rstrip('.')}" if note.root and note.root != note.error else ""
    name = note.op_name or ""
    if name.startswith("gradients/") and "_grad/" in name:
        name += f", in the gradient of {name.removeprefix('gradients/').split('_grad/')[0]}"
        at = f", made at {note.location}" if note.location is not None else ""
    return (f"tape.jacobian(..., experimental_use_pfor=True) failed: pfor could not vectorise"
            f" op {note.op} ({name}{at}){root}; gradcheck used the while loop,"
            f" experimental_use_pfor=False, {OWN_CALLS}")


@note_text.register
def _jacobian_by_rows(note: JacobianByRows) -> str:
    return (f"tape.jacobian failed ({note.error}); the Jacobian was built from {note.size} VJPs"
            " with one-hot upstreams, each on a fresh tape")


@note_text.register
def _compiled_in_own_dtype(note: CompiledInOwnDtype) -> str:
    first = note.promoted
    return (f"the compiled check ran in {note.dtype}, the arguments' own dtype: in float64,"
            f" gradcheck's promotion, {first.status}: {first.headline}")


@note_text.register
def _second_derivatives(note: SecondDerivatives) -> str:
    return f"second derivatives: {note_text(note.note)}"


@note_text.register
def _retried(note: Retried) -> str:
    if not note.jacobian:
        return f"{note.crash}; {RETRY_NOTE}"
    return (f"{note.crash}; {RETRY_NOTE}: tape.jacobian(..., experimental_use_pfor=True)"
            f" crashes TensorFlow on this function where the while loop works, {OWN_CALLS}")
