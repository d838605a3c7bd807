"""The user's function bound to TensorFlow tensors: evaluation, batched evaluation, tape maths."""

from __future__ import annotations

import re
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcheck.errors import FunctionError, InputError
from gradcheck.load.inputs import NamedArgument
from gradcheck.load.locations import exception_location
from gradcheck.numerics.differences import STEP_FACTORS, points_along
from gradcheck.numerics.tolerances import machine_eps
from gradcheck.tf import instrument
from gradcheck.tf.runtime import silenced_stderr_fd, tensorflow

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
# TensorFlow's op errors start with the graph function's name and end with the op's (empty) name.
_TF_ERROR_NOISE = re.compile(r"\{\{function_node [^}]*\}\}\s*|\s*name:\s*$")


@dataclass
class Slot:
    """One argument of the user's function."""

    name: str
    position: int | None
    keyword: str | None
    value: Any
    differentiable: bool
    dtype: str
    shape: tuple[int, ...]
    is_variable: bool = False
    note: str | None = None


@dataclass
class OutputLeaf:
    name: str
    tensor: Any
    differentiable: bool
    origin: str  # "tensor", "numpy", "python"
    reason: str | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.tensor.shape)

    @property
    def dtype(self) -> str:
        return str(self.tensor.dtype.name)


@dataclass
class GradientOutcome:
    """What one tape.gradient call returned for one source."""

    value: np.ndarray | None
    shape: tuple[int, ...] | None
    dtype: str | None
    indexed_slices: bool = False
    error: BaseException | None = None
    error_traceback: str | None = None


def user_traceback(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


def _dtype_name(value: Any) -> str | None:
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return None
    return str(getattr(dtype, "name", dtype))


def _is_float(value: Any) -> bool:
    return _dtype_name(value) in FLOAT_DTYPES


def _own_dtype(value: Any) -> str:
    """The dtype TensorFlow would give the argument: float32 for Python floats and lists."""
    if isinstance(value, (list, tuple, float)):
        return "float32"
    return _dtype_name(value) or "float32"


def _as_differentiable_candidate(value: Any) -> Any:
    """Lists and floats of numbers become arrays; anything else is left as given."""
    if isinstance(value, (list, tuple, float)):
        try:
            array = np.asarray(value)
        except ValueError:
            return value
        if np.issubdtype(array.dtype, np.floating):
            return array
    return value


@dataclass
class Program:
    """The function with its arguments; float arguments are TensorFlow tensors or variables."""

    function: Callable[..., Any]
    slots: list[Slot]
    compute_dtype: str
    notes: list[str] = field(default_factory=list)
    # False: no pfor, no vectorized_map (a retry after TensorFlow crashed while vectorising).
    vectorise: bool = True
    # Told what is about to run, so that a crash or a time-out can name it.
    phase: Callable[[str], None] | None = None

    def announce(self, what: str) -> None:
        if self.phase is not None:
            self.phase(what)

    @property
    def sources(self) -> list[Slot]:
        return [slot for slot in self.slots if slot.differentiable]

    def call(self, replacements: dict[int, Any] | None = None) -> Any:
        """f(*args, **kwargs), each tensor argument a new tensor object on every call.

        Libraries cache results by input tensor identity (TFP bijectors): a reused tensor
        would return the previous call's output, recorded on no tape. tf.identity keeps the
        path to the watched tensor, so tapes and forward accumulators see through it.
        """
        tf = tensorflow()
        replacements = replacements or {}
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for index, slot in enumerate(self.slots):
            value = replacements.get(index, slot.value)
            if isinstance(value, tf.Tensor):
                value = tf.identity(value)
            if slot.keyword is not None:
                kwargs[slot.keyword] = value
            else:
                args.append(value)
        return self.function(*args, **kwargs)


def _build_slots(named: Sequence[NamedArgument], dtype: str | None) -> list[Slot]:
    tf = tensorflow()
    slots = []
    for argument in named:
        value = _as_differentiable_candidate(argument.value)
        keyword = argument.keyword
        if isinstance(value, tf.Variable) and _is_float(value):
            target = dtype or value.dtype.name
            copy = tf.Variable(tf.cast(value, target), name=value.name.split(":")[0])
            slots.append(
                Slot(argument.name, argument.position, keyword, copy, True, target,
                     tuple(copy.shape), is_variable=True)
            )
        elif _is_float(value) and not isinstance(value, tf.Variable):
            target = dtype or _own_dtype(argument.value)
            tensor = tf.cast(tf.convert_to_tensor(value), target)
            slots.append(
                Slot(argument.name, argument.position, keyword, tensor, True, target,
                     tuple(tensor.shape))
            )
        else:
            name = _dtype_name(value) or type(value).__name__
            shape = tuple(np.shape(value)) if hasattr(value, "shape") else ()
            slots.append(
                Slot(argument.name, argument.position, keyword, argument.value, False, name,
                     shape, note=f"{argument.name} is {name}: passed through, not differentiated")
            )
    return slots


def _candidate_dtypes(dtype_mode: str) -> list[str | None]:
    """The dtypes to try in order; None is each argument's own (a literal's is float32)."""
    if dtype_mode in ("auto", "float64"):
        return ["float64", None]
    if dtype_mode == "float32":
        return ["float32"]
    raise InputError(f"--dtype must be auto, float32 or float64, not {dtype_mode!r}")


def _gradient_problem(program: Program) -> str | None:
    """Why gradients cannot be taken in the program's dtype (a grad_fn raising, or returning
    another dtype than its input's), or None."""
    tf = tensorflow()
    mark = instrument.checkpoint()
    try:
        with tf.GradientTape() as tape:
            for slot in program.sources:
                tape.watch(slot.value)
            leaves = [leaf for leaf in flatten_outputs(program.call()) if leaf.differentiable]
        tape.gradient([leaf.tensor for leaf in leaves], [slot.value for slot in program.sources])
    except Exception as exc:
        return first_line(exc)
    slips = instrument.violations_since(mark, "dtype")
    return slips[0].message if slips else None


def _candidate_programs(function: Callable[..., Any], named: Sequence[NamedArgument],
                        dtype_mode: str) -> list[Program]:
    programs: list[Program] = []
    for dtype in _candidate_dtypes(dtype_mode):
        slots = _build_slots(named, dtype)
        if not any(slot.differentiable for slot in slots):
            kinds = ", ".join(f"{s.name} is {s.dtype}" for s in slots) or "no arguments"
            raise InputError(
                f"no floating-point input to differentiate ({kinds}); write floats like"
                " '[1.0, 2.0]'"
            )
        program = Program(function, slots, dtype or _common_dtype(slots))
        if all(p.compute_dtype != program.compute_dtype for p in programs):
            programs.append(program)
    return programs


def prepare(
    function: Callable[..., Any], named: Sequence[NamedArgument], dtype_mode: str
) -> tuple[Program, Any]:
    """Bind the arguments and call f once, in float64 when f and its gradients accept it.

    Promotion is gradcheck's choice, so it must never cause a finding: when f or a grad_fn
    raises or mixes dtypes in float64 only, f is checked in its arguments' own dtype.
    """
    programs = _candidate_programs(function, named, dtype_mode)
    problems: list[str] = []
    ran: list[Program] = []
    error: BaseException | None = None
    for program in programs:
        mark = instrument.checkpoint()
        try:
            result = program.call()
        except (Exception, SystemExit) as exc:  # the user's function raised (or called exit)
            instrument.rollback(mark)
            problems.append(f"{function_name(function)} does not accept"
                            f" {program.compute_dtype} inputs ({first_line(exc)})")
            error = error or exc
            continue
        problem = _gradient_problem(program) if len(programs) > 1 else None
        if problem is None:
            if problems:
                program.notes.append(
                    f"{problems[0]}; checked in {program.compute_dtype}, the arguments' own"
                    f" dtype, with {program.compute_dtype} tolerances")
            return program, result
        instrument.rollback(mark)
        problems.append(f"the gradients of {function_name(function)} cannot be taken in"
                        f" {program.compute_dtype} ({problem})")
        ran.append(program)
    if not ran:
        assert error is not None
        raise function_raised(function, error)
    # The problem is the same in every dtype: the user's own, reported in the first one.
    return ran[0], ran[0].call()


def function_raised(function: Callable[..., Any], exc: BaseException,
                    when: str = "") -> FunctionError:
    """The one-line error for an exception from the user's function, at the user's line."""
    where = exception_location(exc)
    at = f" (at {where})" if where else ""
    return FunctionError(f"{function_name(function)} raised {first_line(exc)}{when}{at}",
                         user_traceback=user_traceback(exc))


def function_name(function: Callable[..., Any]) -> str:
    return str(getattr(function, "__name__", "f"))


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = _TF_ERROR_NOISE.sub("", text.splitlines()[0]).strip() if text else ""
    return f"{type(exc).__name__}: {line[:200]}" if line else type(exc).__name__


def _common_dtype(slots: Sequence[Slot]) -> str:
    dtypes = [slot.dtype for slot in slots if slot.differentiable]
    for candidate in ("float16", "bfloat16", "float32"):
        if candidate in dtypes:
            return candidate
    return "float64"


def flatten_outputs(result: Any, name: str = "y") -> list[OutputLeaf]:
    """Name every leaf of the result: y, y[1], y['mean']; judge whether each is differentiable."""
    tf = tensorflow()
    if isinstance(result, dict):
        leaves = []
        for key, value in result.items():
            leaves += flatten_outputs(value, f"{name}[{key!r}]")
        return leaves
    if isinstance(result, (tuple, list)):
        leaves = []
        for index, value in enumerate(result):
            leaves += flatten_outputs(value, f"{name}[{index}]")
        return leaves
    if result is None:
        return [OutputLeaf(name, None, False, "none", "is None")]
    if isinstance(result, (tf.Tensor, tf.Variable)):
        tensor = tf.convert_to_tensor(result)
        if tensor.dtype.name not in FLOAT_DTYPES:
            reason = (f"is a tensor of dtype {tensor.dtype.name}; only floating-point outputs"
                      " have gradients")
            return [OutputLeaf(name, tensor, False, "tensor", reason)]
        return [OutputLeaf(name, tensor, True, "tensor")]
    origin = "numpy" if isinstance(result, (np.ndarray, np.generic)) else "python"
    try:
        array = np.asarray(result)
    except Exception:
        array = np.asarray(None)
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        reason = f"is a {type(result).__name__}, not a tensor"
        return [OutputLeaf(name, None, False, origin, reason)]
    if not np.issubdtype(array.dtype, np.floating):
        reason = f"is an integer {type(result).__name__}; only floating outputs have gradients"
        return [OutputLeaf(name, tf.constant(array), False, origin, reason)]
    return [OutputLeaf(name, tf.constant(array), True, origin)]


@dataclass
class Recording:
    """One forward pass of f under a persistent tape."""

    program: Program
    tape: Any
    outputs: list[OutputLeaf]
    call_seconds: float = 0.0  # one call of f, warm (after prepare's first)

    # Set when TensorFlow's own way failed and a slower, equivalent one gave the answer.
    workarounds: list[str] = field(default_factory=list)
    fresh_tapes: bool = False

    def gradient(self, output_indices: Sequence[int], source: Slot,
                 upstreams: Sequence[np.ndarray] | None) -> GradientOutcome:
        """tape.gradient on the recorded tape; when that raises, once more on a fresh tape
        (tf.py_function gives its gradient only once per tape): only an error that a fresh
        recording repeats is the user's."""
        if self.fresh_tapes:
            return self.fresh_gradient(output_indices, source, upstreams)
        try:
            with silenced_stderr_fd():
                result = self.tape.gradient(
                    self._targets(self.outputs, output_indices), source.value,
                    output_gradients=self._upstreams(output_indices, upstreams))
        except Exception as exc:  # a grad_fn that raises is a finding, not a crash
            retried = self.fresh_gradient(output_indices, source, upstreams)
            if retried.error is None:
                self.fresh_tapes = True
                self._note(f"the recorded tape could not give the gradient again"
                           f" ({first_line(exc)}); gradients were taken on a fresh tape per call")
                return retried
            return GradientOutcome(None, None, None, error=exc, error_traceback=user_traceback(exc))
        return _outcome(result)

    def fresh_gradient(self, output_indices: Sequence[int], source: Slot,
                       upstreams: Sequence[np.ndarray] | None) -> GradientOutcome:
        """Call f again under a new tape and take one gradient from it."""
        tf = tensorflow()
        try:
            with tf.GradientTape() as tape:
                tape.watch(source.value)
                outputs = flatten_outputs(self.program.call())
            result = tape.gradient(self._targets(outputs, output_indices), source.value,
                                   output_gradients=self._upstreams(output_indices, upstreams))
        except Exception as exc:
            return GradientOutcome(None, None, None, error=exc, error_traceback=user_traceback(exc))
        return _outcome(result)

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

    def _note(self, text: str) -> None:
        if text not in self.workarounds:
            self.workarounds.append(text)

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
        if max_memory is not None and rows * per_row > max_memory and self.program.vectorise:
            self.program.announce(f"the vectorised tape.jacobian of {of}, in chunks of rows")
            try:
                return self._jacobian_in_chunks(target, source, max(1, max_memory // per_row)), None
            except Exception as exc:
                return None, first_line(exc)
        messages: list[str] = []
        for use_pfor in (True, False) if self.program.vectorise else (False,):
            self.program.announce(f"the {'vectorised' if use_pfor else 'while-loop'}"
                                  f" tape.jacobian of {of}")
            try:
                with silenced_stderr_fd():
                    block = self.tape.jacobian(target, source.value,
                                               experimental_use_pfor=use_pfor)
            except Exception as exc:
                messages.append(first_line(exc))
                continue
            if block is None:
                messages.append("tape.jacobian returned None")
                continue
            if messages:
                self._note(f"the vectorised tape.jacobian failed ({messages[0]}); the"
                           " while-loop tape.jacobian(experimental_use_pfor=False) was used")
            elif not use_pfor:
                self._note("tape.jacobian ran without vectorisation (experimental_use_pfor="
                           "False)")
            return np.asarray(block, dtype=np.float64), None
        return self._jacobian_by_rows(output_index, source, messages)

    def _jacobian_by_rows(self, output_index: int, source: Slot, messages: list[str]
                          ) -> tuple[np.ndarray | None, str | None]:
        shape = self.outputs[output_index].shape
        size = int(np.prod(shape, dtype=np.int64))
        rows = []
        for i in range(size):
            upstream = np.zeros(size)
            upstream[i] = 1.0
            outcome = self.fresh_gradient([output_index], source, [upstream.reshape(shape)])
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
        self._note(f"tape.jacobian failed ({messages[0]}); the Jacobian was built from"
                   f" {size} VJPs with one-hot upstreams, each on a fresh tape")
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
        parts = [
            np.asarray(tf.vectorized_map(row, tf.range(start, min(size, start + rows_per_chunk)),
                                         fallback_to_while_loop=True), dtype=np.float64)
            for start in range(0, size, rows_per_chunk)
        ]
        return np.concatenate(parts).reshape(shape + source.shape)


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
    """Run f under a persistent GradientTape watching every differentiable argument."""
    tf = tensorflow()
    with tf.GradientTape(persistent=True) as tape:
        for slot in program.sources:
            tape.watch(slot.value)
        start = time.perf_counter()
        try:
            result = program.call()
        except (Exception, SystemExit) as exc:
            raise function_raised(program.function, exc) from exc
    return Recording(program, tape, flatten_outputs(result, output_base(program)),
                     time.perf_counter() - start)


def output_base(program: Program) -> str:
    """Outputs are y, y[0], y['mean']... unless an argument is already called y."""
    return "out" if any(slot.name == "y" for slot in program.slots) else "y"


def _require_agreement(arrays: Sequence[np.ndarray], row: int,
                       expected_outputs: Sequence[np.ndarray], eps: float) -> None:
    """Row `row` of each vectorised output must equal the eager outputs at that point
    (up to the rounding of the dtype f computes in: graph and eager kernels may differ)."""
    rtol = max(1e-5, 1e3 * eps)
    for array, expected in zip(arrays, expected_outputs):
        scale = np.max(np.abs(expected)) if expected.size else 0.0
        if array.shape[1:] != expected.shape or not np.allclose(
            array[row], expected, rtol=rtol, atol=rtol * 0.1 * (scale + 1.0), equal_nan=True
        ):
            raise ValueError("vectorised evaluation disagrees with eager evaluation")


def _require_same_change(arrays: Sequence[np.ndarray], eager_last: Sequence[np.ndarray],
                         centre: Sequence[np.ndarray], eps: float) -> None:
    """f(last point) - f(x) must be the same vectorised and eager: the step is tiny, so
    compare the changes, not the values."""
    for array, last, middle in zip(arrays, eager_last, centre):
        noise = 1e3 * eps * (np.abs(middle) + 1.0)
        if not np.allclose(array[-1] - array[0], last - middle, rtol=1e-2, atol=0.0) and \
                np.any(np.abs((array[-1] - array[0]) - (last - middle)) > noise):
            raise ValueError("vectorised evaluation disagrees with eager evaluation")


class BatchEvaluator:
    """Evaluates f at many values of one argument: vectorised when possible, else one by one."""

    def __init__(self, program: Program, slot_index: int, output_indices: Sequence[int],
                 centre_outputs: Sequence[np.ndarray], max_memory: int) -> None:
        self.program = program
        self.slot_index = slot_index
        self.output_indices = list(output_indices)
        self.centre_outputs = [np.asarray(c, dtype=np.float64) for c in centre_outputs]
        self.max_memory = max_memory
        slot = program.slots[slot_index]
        usable = program.vectorise and not slot.is_variable
        self.vectorised: Any = self._vectorised_function() if usable else None
        self.strategy = "vectorised" if self.vectorised is not None else "loop"
        self.fallback_reason: str | None = None if usable else (
            f"{slot.name} is a tf.Variable" if slot.is_variable else "vectorisation is off")

    def _outputs_of(self, result: Any) -> list[Any]:
        tf = tensorflow()
        leaves = flatten_outputs(result)
        return [tf.cast(leaves[i].tensor, tf.float64) for i in self.output_indices]

    def _vectorised_function(self) -> Any:
        tf = tensorflow()
        slot = self.program.slots[self.slot_index]

        def one(point: Any) -> list[Any]:
            return self._outputs_of(self.program.call({self.slot_index: point}))

        signature = [tf.TensorSpec((None, *slot.shape), slot.dtype)]
        return tf.function(
            lambda points: tf.vectorized_map(one, points, fallback_to_while_loop=True),
            input_signature=signature, autograph=False,
        )

    def chunk_size(self) -> int:
        """Points per vectorised call: the input and outputs of each point, float64, with room
        for the intermediates of f (assumed to be at most BATCH_OVERHEAD times as large)."""
        slot = self.program.slots[self.slot_index]
        per_point = point_bytes(slot.shape, [c.shape for c in self.centre_outputs])
        return max(4, int(self.max_memory // max(per_point * BATCH_OVERHEAD, 1)) // 4 * 4)

    def evaluate(self, points: np.ndarray) -> list[np.ndarray]:
        """Outputs (len(points), *out) for each selected output."""
        if self.vectorised is not None:
            try:
                return self._evaluate_vectorised(points)
            except Exception as exc:  # not vectorisable: fall back to the loop
                self.vectorised = None
                self.strategy = "loop"
                self.fallback_reason = f"vectorised evaluation failed ({type(exc).__name__})"
        return self._evaluate_loop(points)

    def _evaluate_vectorised(self, points: np.ndarray) -> list[np.ndarray]:
        tf = tensorflow()
        slot = self.program.slots[self.slot_index]
        centre = np.asarray(slot.value.numpy(), dtype=np.float64)[None]
        # The unperturbed point rides along: if it disagrees with eager f(x), the batch is wrong.
        batch = np.concatenate([centre, points]) if points.size else centre
        self.program.announce(f"the vectorised evaluation of f at {len(batch)} values of"
                              f" {slot.name} (tf.vectorized_map)")
        values = self.vectorised(tf.constant(batch, dtype=slot.dtype))
        arrays = [np.asarray(v, dtype=np.float64) for v in values]
        eps = machine_eps(self.program.compute_dtype)
        _require_agreement(arrays, 0, self.centre_outputs, eps)
        if points.size and not self.spot_checked:
            # Stateful code (a variable assigned inside f) can vectorise silently wrong:
            # one perturbed point, evaluated eagerly, must agree as well.
            _require_same_change(arrays, self._evaluate_point(slot, points[-1]),
                                 self.centre_outputs, eps)
            self.spot_checked = True
        return [a[1:] for a in arrays]

    spot_checked = False

    def _evaluate_point(self, slot: Slot, point: np.ndarray) -> list[np.ndarray]:
        tf = tensorflow()
        value = tf.constant(point, dtype=slot.dtype)
        try:
            if slot.is_variable:
                slot.value.assign(value)
                result = self.program.call()
            else:
                result = self.program.call({self.slot_index: value})
            outputs = [np.asarray(o, dtype=np.float64) for o in self._outputs_of(result)]
        except (Exception, SystemExit) as exc:
            raise function_raised(self.program.function, exc,
                                  f" when {slot.name} moved by a finite-difference step") from exc
        for output, centre in zip(outputs, self.centre_outputs):
            if output.shape != centre.shape:
                raise FunctionError(
                    f"{function_name(self.program.function)} returned an output of shape"
                    f" {output.shape} when {slot.name} moved by a finite-difference step, but"
                    f" {centre.shape} at the given point: an output whose shape depends on the"
                    " input's values has no Jacobian there")
        return outputs

    def _evaluate_loop(self, points: np.ndarray) -> list[np.ndarray]:
        slot = self.program.slots[self.slot_index]
        collected: list[list[np.ndarray]] = [[] for _ in self.output_indices]
        original = slot.value.numpy() if slot.is_variable else None
        try:
            for point in points:
                for bucket, output in zip(collected, self._evaluate_point(slot, point)):
                    bucket.append(output)
        finally:
            if slot.is_variable:
                slot.value.assign(original)
        return [
            np.stack(b) if b else np.zeros((0, *c.shape))
            for b, c in zip(collected, self.centre_outputs)
        ]

    def evaluate_perturbations(
        self, h: np.ndarray, factors: tuple[float, ...] = STEP_FACTORS,
        elements: np.ndarray | None = None, progress: Callable[[int, int], None] | None = None,
    ) -> list[np.ndarray]:
        """f at x + factor*h along each element (all, or the listed flat ones), in chunks.

        Returns, per output, (len(factors) * k, *out) in the order of `points_along`.
        """
        slot = self.program.slots[self.slot_index]
        x = np.asarray(slot.value.numpy(), dtype=np.float64)
        index = np.arange(int(np.prod(slot.shape))) if elements is None else np.asarray(elements)
        per_chunk = max(1, self.chunk_size() // len(factors))
        parts: list[list[np.ndarray]] = [[] for _ in self.output_indices]
        for start in range(0, index.size, per_chunk):
            points = points_along(x, h, index[start:start + per_chunk], factors)
            for bucket, values in zip(parts, self.evaluate(points)):
                bucket.append(values)
            if progress is not None:
                progress(min(index.size, start + per_chunk), index.size)
        return [np.concatenate(p) if p else np.zeros((0, *c.shape))
                for p, c in zip(parts, self.centre_outputs)]


# How much larger than its input and outputs one vectorised evaluation may grow in memory.
BATCH_OVERHEAD = 16


def point_bytes(input_shape: Sequence[int], output_shapes: Sequence[Sequence[int]]) -> int:
    """Bytes of one evaluation point and its outputs, in float64."""
    return 8 * (int(np.prod(input_shape, dtype=np.int64))
                + sum(int(np.prod(s, dtype=np.int64)) for s in output_shapes))
