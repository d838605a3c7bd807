"""f recorded under a GradientTape: VJPs, Jacobians (vectorised or not) and forward-mode JVPs."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from gradcheck.engine.batch import BATCH_OVERHEAD, point_bytes
from gradcheck.engine.observer import forward_mode
from gradcheck.engine.program import (
    OutputLeaf,
    Program,
    Slot,
    Untraceable,
    first_line,
    flatten_outputs,
    function_raised,
    no_float_input,
    output_base,
    user_traceback,
)
from gradcheck.engine.runtime import silenced_stderr_fd, tensorflow
from gradcheck.engine.variables import (
    select_sources,
    unbuilt_layers,
    unread_weights,
    variable_slots,
)
from gradcheck.errors import Phase
from gradcheck.evidence import Location
from gradcheck.evidence.notes import FreshTapes, JacobianByRows, Note, WhileLoopJacobian
from gradcheck.forensics.pfor import while_loop_note
from gradcheck.forensics.site_lines import caller_location
from gradcheck.load.inputs import ones_like
from gradcheck.load.locations import exception_location, format_location
from gradcheck.targets.keras import LayerAtWork, layer_at_work, program_layers


@dataclass
class GradientOutcome:
    """What one tape.gradient call returned for one source."""

    value: np.ndarray | None
    shape: tuple[int, ...] | None
    dtype: str | None
    indexed_slices: bool = False
    error: BaseException | None = None
    error_traceback: str | None = None

    @property
    def error_line(self) -> str:
        return first_line(self.error) if self.error is not None else ""

    @property
    def location(self) -> Location | None:
        """The user's line that raised, when computing the gradient raised."""
        return exception_location(self.error) if self.error is not None else None


@dataclass
class Recording:
    """One forward pass of f under a persistent tape."""

    program: Program
    tape: Any
    outputs: list[OutputLeaf]
    call_seconds: float = 0.0  # one call of f, warm (after prepare's first)
    # Trainable weights of a Keras target that f never read under the tape, and sublayers
    # that were never called (no weights at all).
    unread_weights: tuple[str, ...] = ()
    unbuilt_layers: tuple[str, ...] = ()
    # What recording found out about f's sources (variables listed, --wrt's choice).
    notes: tuple[Note, ...] = ()

    # Set when TensorFlow's own way failed and a slower, equivalent one gave the answer.
    workarounds: list[Note] = field(default_factory=list)
    fresh_tapes: bool = False
    # Variables f created during the recorded call (Keras layers built inside f), and the
    # user's line that created the first.
    created_variables: int = 0
    created_at: Location | None = None
    # The Keras layer whose call created them (and the layer it made anew), and their names.
    created_in_call: LayerAtWork | None = None
    created_names: tuple[str, ...] = ()
    # f entered a ForwardAccumulator of its own inside forward_jvp's (forward over forward).
    nested_forward: bool = False
    # tape.jacobian's vectorised path was tried where gradcheck took rows (pfor_failure).
    pfor_tried: bool = False
    # The checks ask for the VJP with the same upstream arrays (vjp, compiled, a block's
    # own): one backward pass each, kept with the arrays it was computed for.
    _vjps: dict[Any, tuple[Sequence[np.ndarray] | None, GradientOutcome]] = field(
        default_factory=dict, repr=False, compare=False)

    def gradient(self, output_indices: Sequence[int], source: Slot,
                 upstreams: Sequence[np.ndarray] | None) -> GradientOutcome:
        """tape.gradient(ys, x, output_gradients=us) for one source."""
        kept = self._vjps.get(self._vjp_key(output_indices, source, upstreams))
        if kept is not None:
            return kept[1]
        return self.kept_gradients(output_indices, [source], upstreams)[0]

    def kept_gradients(self, output_indices: Sequence[int], sources: Sequence[Slot],
                       upstreams: Sequence[np.ndarray] | None) -> list[GradientOutcome]:
        """`gradients`, each outcome kept for `gradient` to return with the same arrays."""
        outcomes = self.gradients(output_indices, sources, upstreams)
        for source, outcome in zip(sources, outcomes):
            if int(np.prod(source.shape, dtype=np.int64)) <= KEPT_VJP_SIZE:
                self._vjps[self._vjp_key(output_indices, source, upstreams)] = (
                    None if upstreams is None else list(upstreams), outcome)
        return outcomes

    @staticmethod
    def _vjp_key(output_indices: Sequence[int], source: Slot,
                 upstreams: Sequence[np.ndarray] | None) -> tuple[Any, ...]:
        return (tuple(output_indices), source.name,
                None if upstreams is None else tuple(id(u) for u in upstreams))

    def plain_gradient(self, output_indices: Sequence[int], source: Slot) -> GradientOutcome:
        """tape.gradient(ys, x) as the user's f gives it: TensorFlow's implicit upstream is
        ones, 1 + 0j for a complex output (whose parts gradcheck holds side by side)."""
        if not any(self.outputs[i].complex_dtype for i in output_indices):
            return self.gradient(output_indices, source, None)
        return self.gradient(output_indices, source, [ones_like(
            tuple(self.outputs[i].tensor.shape), self.outputs[i].complex_dtype is not None)
            for i in output_indices])

    def gradients(self, output_indices: Sequence[int], sources: Sequence[Slot],
                  upstreams: Sequence[np.ndarray] | None) -> list[GradientOutcome]:
        """One backward pass for several sources, on the recorded tape; when that raises,
        once more on a fresh tape (tf.py_function gives its gradient only once per tape):
        only an error that a fresh recording repeats is the user's (in every outcome)."""
        if not self.fresh_tapes:
            try:
                with silenced_stderr_fd():
                    return self._backward(self.tape, self.outputs, output_indices, sources,
                                          upstreams)
            except Exception as exc:  # a grad_fn that raises is a finding, not a crash
                retried = self.fresh_gradients(output_indices, sources, upstreams)
                if retried[0].error is not None:
                    return [_failure(exc) for _ in sources]
                self.fresh_tapes = True
                self._note(FreshTapes(first_line(exc)))
                return retried
        return self.fresh_gradients(output_indices, sources, upstreams)

    def fresh_gradients(self, output_indices: Sequence[int], sources: Sequence[Slot],
                        upstreams: Sequence[np.ndarray] | None) -> list[GradientOutcome]:
        """Call f again under a new tape and take one backward pass from it."""
        tf = tensorflow()
        try:
            with tf.GradientTape() as tape:
                for source in sources:
                    tape.watch(source.value)
                outputs = flatten_outputs(self.program.call())
            return self._backward(tape, outputs, output_indices, sources, upstreams)
        except Exception as exc:
            return [_failure(exc) for _ in sources]

    def _backward(self, tape: Any, outputs: Sequence[OutputLeaf], output_indices: Sequence[int],
                  sources: Sequence[Slot], upstreams: Sequence[np.ndarray] | None
                  ) -> list[GradientOutcome]:
        results = tape.gradient(self._targets(outputs, output_indices),
                                [source.value for source in sources],
                                output_gradients=self._upstreams(output_indices, upstreams))
        return [_outcome(result) for result in results]

    def forward_jvp(self, source: Slot, tangent: np.ndarray, output_indices: Sequence[int]
                    ) -> list[np.ndarray | None]:
        """J·v by forward mode (tf.autodiff.ForwardAccumulator) for each selected output;
        raises what TensorFlow raises (forward mode is not defined for every op)."""
        tf = tensorflow()
        self.program.announce(f"the forward-mode JVP (tf.autodiff.ForwardAccumulator) for"
                              f" {source.name}")
        index = next(i for i, slot in enumerate(self.program.slots) if slot is source)
        # An argument is watched as a copy made for this call: f takes it as it is.
        copied = source.argument and not source.is_variable
        watched = tf.constant(source.value.numpy()) if copied else source.value
        with forward_mode(), _accumulators_entered() as entered, tf.autodiff.ForwardAccumulator(
                watched, tf.constant(tangent, dtype=source.dtype)) as accumulator:
            leaves = flatten_outputs(self.program.call({index: watched} if copied else None,
                                                       fresh=True))
            jvps = [accumulator.jvp(leaves[k].tensor) for k in output_indices]
        self.nested_forward = self.nested_forward or entered[0] > 1
        # A JVP may come back as IndexedSlices (gather, segment ops): densified.
        return [None if j is None else np.asarray(tf.convert_to_tensor(j), dtype=np.float64)
                for j in jvps]

    @staticmethod
    def _targets(outputs: Sequence[OutputLeaf], output_indices: Sequence[int]) -> list[Any]:
        return [outputs[i].tensor for i in output_indices]

    def _upstreams(self, output_indices: Sequence[int],
                   upstreams: Sequence[np.ndarray] | None) -> list[Any] | None:
        if upstreams is None:
            return None
        tf = tensorflow()
        return [tf.constant(u, dtype=self.outputs[i].tensor.dtype)
                for u, i in zip(upstreams, output_indices)]

    def _note(self, note: Note) -> None:
        if note not in self.workarounds:
            self.workarounds.append(note)

    def jacobian(self, output_index: int, source: Slot, max_memory: int | None = None
                 ) -> tuple[np.ndarray | None, str | None]:
        """The autodiff block (out + in), vectorised first; an error message when every way fails.

        When the vectorised Jacobian would not fit in max_memory it is built in chunks of rows.
        When TensorFlow's Jacobian paths fail (or the vectorised one returns None while
        tape.gradient does not), rows are VJPs with one-hot upstreams on fresh tapes, as
        tf.test.compute_gradient builds them.
        """
        target = self.outputs[output_index].tensor
        rows = int(np.prod(target.shape, dtype=np.int64))
        per_row = point_bytes(source.shape, [()]) * BATCH_OVERHEAD
        of = f"{self.outputs[output_index].name} with respect to {source.name}"
        vectorise = self.program.evaluation.vectorise
        if max_memory is not None and rows * per_row > max_memory and vectorise:
            self.program.announce(Phase(f"the vectorised tape.jacobian of {of}, in chunks of"
                                        " rows", vectorised=True))
            try:
                return self._jacobian_in_chunks(target, source, max(1, max_memory // per_row)), None
            except Exception as exc:
                return None, first_line(exc)
        messages: list[str] = []
        raised: BaseException | None = None  # by pfor
        for use_pfor in (True, False) if vectorise else (False,):
            self.program.announce(Phase(f"the {'vectorised' if use_pfor else 'while-loop'}"
                                        f" tape.jacobian of {of}", vectorised=use_pfor))
            try:
                with silenced_stderr_fd():
                    block = (self._vectorised_jacobian(target, source) if use_pfor else
                             self.tape.jacobian(target, source.value,
                                                experimental_use_pfor=False))
            except Exception as exc:
                messages.append(first_line(exc))
                raised = exc if use_pfor else raised
                continue
            if block is None:
                messages.append("tape.jacobian returned None")
                continue
            if messages:
                self._note(while_loop_note(messages[0], raised, self.program))
            elif not use_pfor:
                self._note(WhileLoopJacobian())
            return np.asarray(block, dtype=np.float64), None
        return self._jacobian_by_rows(output_index, source, messages)

    def pfor_failure(self, output_index: int, source: Slot) -> WhileLoopJacobian | None:
        """Where gradcheck took a small output's Jacobian by rows, tape.jacobian's vectorised
        path (pfor) as users call it, once per recording: the note when it fails."""
        target = self.outputs[output_index].tensor
        size = int(np.prod(target.shape, dtype=np.int64))
        if self.pfor_tried or not self.program.evaluation.vectorise or not 0 < size <= TAPE_ROWS:
            return None
        self.pfor_tried = True
        tf = tensorflow()
        self.program.announce(Phase(f"the vectorised tape.jacobian of"
                                    f" {self.outputs[output_index].name} with respect to"
                                    f" {source.name}", vectorised=True))
        try:
            with silenced_stderr_fd():
                tf.function(lambda: self.tape.jacobian(target, source.value,
                                                       experimental_use_pfor=True),
                            autograph=False).get_concrete_function()()
        except Exception as exc:  # pfor's gap, not f's: the rows stand
            return while_loop_note(first_line(exc), exc, self.program)
        return None

    def _vectorised_jacobian(self, target: Any, source: Slot) -> Any:
        """tape.jacobian(experimental_use_pfor=True) traced once, as its own concrete function
        (eager tape.jacobian wraps pfor in a new tf.function on every call); a few rows are
        cheaper as backward passes on the recorded tape than tracing pfor."""
        tf = tensorflow()
        shape = tuple(int(d) for d in target.shape)
        size = int(np.prod(shape, dtype=np.int64))
        if not 0 < size <= TAPE_ROWS:
            return tf.function(
                lambda: self.tape.jacobian(target, source.value, experimental_use_pfor=True),
                autograph=False,
            ).get_concrete_function()()
        rows, one_hot = [], np.eye(size).reshape((size, *shape))
        for i in range(size):
            upstream = tf.constant(one_hot[i], dtype=target.dtype)
            row = self.tape.gradient(target, source.value, output_gradients=upstream)
            if row is None:
                return None
            row = np.asarray(tf.convert_to_tensor(row), dtype=np.float64)
            if row.shape != source.shape:
                raise ValueError(f"a row of the Jacobian has shape {row.shape}, not"
                                 f" {source.shape}")
            rows.append(row)
        return np.stack(rows).reshape(shape + source.shape)

    def _jacobian_by_rows(self, output_index: int, source: Slot, messages: list[str]
                          ) -> tuple[np.ndarray | None, str | None]:
        shape = self.outputs[output_index].shape
        size = int(np.prod(shape, dtype=np.int64))
        rows = []
        for i in range(size):
            upstream = np.zeros(size)
            upstream[i] = 1.0
            outcome = self.fresh_gradients([output_index], [source],
                                           [upstream.reshape(shape)])[0]
            if outcome.error is not None:
                return None, messages[-1] if messages else first_line(outcome.error)
            if outcome.value is None:
                if all(m == "tape.jacobian returned None" for m in messages):
                    return None, None
                rows.append(np.zeros(source.shape))
            elif outcome.shape != source.shape:
                return None, messages[-1]
            else:
                rows.append(outcome.value)
        self._note(JacobianByRows(messages[0], size))
        return np.stack(rows).reshape(shape + source.shape), None

    def _jacobian_in_chunks(self, target: Any, source: Slot, rows_per_chunk: int
                            ) -> np.ndarray | None:
        """Rows of J as vectorised VJPs with one-hot upstreams, rows_per_chunk at a time."""
        tf = tensorflow()
        shape = tuple(int(d) for d in target.shape)
        size = int(np.prod(shape, dtype=np.int64))

        def row(i: Any) -> Any:
            upstream = tf.reshape(tf.one_hot(i, size, dtype=target.dtype), shape)
            return self.tape.gradient(target, source.value, output_gradients=upstream)

        if self.tape.gradient(target, source.value) is None:
            return None
        rows = tf.function(
            lambda indices: tf.vectorized_map(row, indices, fallback_to_while_loop=True),
            input_signature=[tf.TensorSpec((None,), tf.int32)], autograph=False,
        ).get_concrete_function()
        parts = [
            np.asarray(rows(tf.range(start, min(size, start + rows_per_chunk))),
                       dtype=np.float64)
            for start in range(0, size, rows_per_chunk)
        ]
        return np.concatenate(parts).reshape(shape + source.shape)


@contextlib.contextmanager
def _accumulators_entered() -> Iterator[list[int]]:
    """How many ForwardAccumulators are entered meanwhile (f's own, inside gradcheck's)."""
    accumulator, entered = tensorflow().autodiff.ForwardAccumulator, [0]
    enter = accumulator.__enter__

    def counted(self: Any) -> Any:
        entered[0] += 1
        return enter(self)

    accumulator.__enter__ = counted
    try:
        yield entered
    finally:
        accumulator.__enter__ = enter


def _when_taped(program: Program, tape: Any) -> str:
    """When f raised under the tape: only then, if a call without it still works."""
    try:
        with tape.stop_recording():
            program.call()
    except (Exception, SystemExit):
        return ""
    traced = hasattr(program.function, "get_concrete_function")
    return (", under a GradientTape only (it runs without one" + (
        ": a tf.function builds its gradient, its custom gradients' included, when a tape"
        " watches its call)" if traced else ")"))


# VJPs of sources up to this many elements are kept for the checks that ask again.
KEPT_VJP_SIZE = 1_000_000
# Outputs up to this size get their Jacobian row by row (one backward pass each).
TAPE_ROWS = 16


def _failure(exc: BaseException) -> GradientOutcome:
    return GradientOutcome(None, None, None, error=exc, error_traceback=user_traceback(exc))


def _outcome(result: Any) -> GradientOutcome:
    tf = tensorflow()
    if result is None:
        return GradientOutcome(None, None, None)
    indexed = isinstance(result, tf.IndexedSlices)
    dense = tf.convert_to_tensor(result)
    return GradientOutcome(
        np.asarray(dense.numpy(), dtype=np.float64), tuple(int(d) for d in dense.shape),
        dense.dtype.name, indexed_slices=indexed,
    )


def record(program: Program) -> Recording:
    """Run f under a persistent GradientTape watching every differentiable argument and the
    trainable variables f reads (which become sources too, as --wrt allows)."""
    tf = tensorflow()
    created: list[Any] = []
    created_at: list[Location | None] = []
    in_call: list[LayerAtWork] = []
    known = program_layers(program)

    def noting(next_creator: Any, **kwargs: Any) -> Any:
        variable = next_creator(**kwargs)
        if not created:
            at_work = layer_at_work(known)
            line = None if at_work is None else at_work.line
            created_at.append(caller_location() if line is None else format_location(*line))
            in_call.extend(found for found in [at_work] if found is not None)
        created.append(variable)
        return variable

    with tf.GradientTape(persistent=True) as tape, tf.variable_creator_scope(noting):
        for slot in program.sources:
            tape.watch(slot.value)
        start = time.perf_counter()
        try:
            result = program.call()
        except (Exception, SystemExit) as exc:
            raise function_raised(program.function, exc, _when_taped(program, tape)) from exc
        seconds = time.perf_counter() - start
        outputs = flatten_outputs(result, output_base(program))  # complex parts on the tape
    if in_call:
        # A Keras layer's call makes them on a call after the first, so on every call:
        # tf.function cannot trace f, and a failed trace may leave the layer's Python state
        # half-updated (a list holding a graph tensor) for every later call: never traced.
        program = replace(program, untraceable=Untraceable(
            f"{in_call[0].layer_class}.call creates tf.Variables on every call", created_at[0]))
    # Variables f creates on each call are copies of values, not parameters to train.
    read = [v for v in tape.watched_variables() if not any(v is c for c in created)]
    slots, notes = variable_slots(program, read)
    program = replace(program, slots=program.slots + tuple(slots))
    if not program.sources:
        raise no_float_input(program)
    selected, left_out = select_sources(program.slots, program.evaluation.wrt)
    program = replace(program, slots=selected)
    unread = unread_weights(program.function, read)
    return Recording(program, tape, outputs, seconds,
                     unread_weights=tuple(s.name for s in slots
                                          if any(s.value is v for v in unread)),
                     unbuilt_layers=tuple(unbuilt_layers(program.function)),
                     notes=tuple(notes + left_out), created_variables=len(created),
                     created_at=created_at[0] if created_at else None,
                     created_in_call=in_call[0] if in_call else None,
                     created_names=tuple(str(v.name).split(":")[0] for v in created))
