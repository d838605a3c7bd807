"""Evaluating f at many values of one argument: vectorised (tf.vectorized_map), one by one
through a traced f, or one by one eagerly."""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gradcheck.engine.program import (
    Program,
    Slot,
    first_line,
    flatten_outputs,
    function_name,
    function_raised,
    kept_with,
)
from gradcheck.engine.runtime import tensorflow
from gradcheck.errors import FunctionError, Phase
from gradcheck.evidence.notes import PointByPoint
from gradcheck.load.locations import exception_location
from gradcheck.numerics import float32
from gradcheck.numerics.differences import STEP_FACTORS, points_along
from gradcheck.numerics.tolerances import machine_eps


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
        with np.errstate(invalid="ignore"):  # inf - inf where f overflows: NaN, never a change
            if not np.allclose(array[-1] - array[0], last - middle, rtol=1e-2, atol=0.0) and \
                    np.any(np.abs((array[-1] - array[0]) - (last - middle)) > noise):
                raise ValueError("vectorised evaluation disagrees with eager evaluation")


def _selected_outputs(result: Any, output_indices: Sequence[int]) -> list[Any]:
    """The selected leaves of f's result, as float64 tensors."""
    tf = tensorflow()
    leaves = flatten_outputs(result)
    return [tf.cast(leaves[i].tensor, tf.float64) for i in output_indices]


def _traced_for_one_point(program: Program, output_indices: Sequence[int]) -> Any:
    """f's selected outputs as a concrete function of one value per source (a variable is
    assigned it), holding the program only weakly: it is kept with the program."""
    tf = tensorflow()
    sources = [i for i, s in enumerate(program.slots) if s.differentiable]
    weak = weakref.ref(program)

    def at(*points: Any) -> list[Any]:
        bound = weak()
        assert bound is not None
        replacements: dict[int, Any] = {}
        for index, point in zip(sources, points):
            slot = bound.slots[index]
            if slot.is_variable:
                slot.value.assign(point)
            else:
                replacements[index] = point
        return _selected_outputs(bound.call(replacements), output_indices)

    signature = [tf.TensorSpec(program.slots[i].shape, program.slots[i].dtype) for i in sources]
    return tf.function(at, input_signature=signature, autograph=False).get_concrete_function()


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
        usable = program.evaluation.vectorise and not slot.is_variable
        # Few elements, few points: calling f on each is cheaper than tracing vectorized_map
        # (or making its tf.function, a tenth of a millisecond).
        self.few_elements = int(np.prod(slot.shape, dtype=np.int64)) <= EAGER_ELEMENTS
        self.vectorised: Any = (self._vectorised_function() if usable and not self.few_elements
                                else None)
        self.concrete: Any = None
        self.strategy = "vectorised" if usable and not self.few_elements else "loop"
        self.fallback_reason: PointByPoint | None = None if usable else PointByPoint(
            slot.name, variable=slot.is_variable)
        # f traced for one point: None until tracing pays, False once it failed or disagreed.
        self.traced_point: Any = None if program.evaluation.vectorise else False
        self._trace_key = ("f traced for one point", tuple(self.output_indices))
        self.eager_seconds: float | None = None

    def _outputs_of(self, result: Any) -> list[Any]:
        return _selected_outputs(result, self.output_indices)

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

    def _traced(self) -> Any:
        """The vectorised function traced once (any number of points), on first use: every
        chunk, x ± h and x ± 2h alike, calls the same concrete function."""
        if self.concrete is None:
            self.concrete = self.vectorised.get_concrete_function()
        return self.concrete

    def chunk_size(self) -> int:
        """Points per vectorised call: the input and outputs of each point, float64, with room
        for the intermediates of f (assumed to be at most BATCH_OVERHEAD times as large)."""
        slot = self.program.slots[self.slot_index]
        per_point = point_bytes(slot.shape, [c.shape for c in self.centre_outputs])
        return max(4, int(self.max_memory // max(per_point * BATCH_OVERHEAD, 1)) // 4 * 4)

    def evaluate(self, points: np.ndarray) -> list[np.ndarray]:
        """Outputs (len(points), *out) for each selected output."""
        if self.vectorised is not None and not self.few_elements:
            try:
                return self._evaluate_vectorised(points)
            except Exception as exc:  # not vectorisable: fall back to the loop
                self.vectorised = None
                self.strategy = "loop"
                self.fallback_reason = PointByPoint(
                    self.program.slots[self.slot_index].name, first_line(exc),
                    at=exception_location(exc))
        return self._evaluate_loop(points)

    def _evaluate_vectorised(self, points: np.ndarray) -> list[np.ndarray]:
        tf = tensorflow()
        slot = self.program.slots[self.slot_index]
        centre = np.asarray(slot.value.numpy(), dtype=np.float64)[None]
        # The unperturbed point rides along: if it disagrees with eager f(x), the batch is wrong.
        batch = np.concatenate([centre, points]) if points.size else centre
        self.program.announce(Phase(f"the vectorised evaluation of f at {len(batch)} values of"
                                    f" {slot.name} (tf.vectorized_map)", vectorised=True))
        values = self._traced()(tf.constant(batch, dtype=slot.dtype))
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
        try:
            result = self.program.call_at({self.slot_index: point})
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
        for n, point in enumerate(points):
            if (n or self.traced_point) and self._tracing_pays(len(points) - n):
                traced = self._evaluate_traced(points[n:], points[n - 1] if n else None,
                                               [bucket[-1] for bucket in collected if bucket])
                if traced is not None:
                    for bucket, rest in zip(collected, traced):
                        bucket.extend(rest)
                    break
            started = time.perf_counter()
            for bucket, output in zip(collected, self._evaluate_point(slot, point)):
                bucket.append(output)
            self.eager_seconds = time.perf_counter() - started
        return [
            np.stack(b) if b else np.zeros((0, *c.shape))
            for b, c in zip(collected, self.centre_outputs)
        ]

    def _tracing_pays(self, left: int) -> bool:
        """Whether the calls left would take long enough eagerly that f traced once pays (a
        Keras model's eager call costs ten times its traced one; a small f's does not)."""
        seconds = self.eager_seconds
        if seconds is None or self.traced_point is False or seconds <= TRACED_CALL_MIN_SECONDS:
            return False
        # Once traced (for another input too), f's trace serves any number of points.
        traced = kept_with(self.program).get(self._trace_key)
        return bool(self.traced_point or traced) or (left >= TRACED_MIN_POINTS
                                                     and left * seconds > TRACING_PAYS_SECONDS)

    def _point_function(self) -> Any:
        """f traced once for every input of the program, shared by their evaluators (each
        moves its own input; the others stay where they are): tracing a Keras model once per
        weight cost several eager calls each. False once tracing failed."""
        kept = kept_with(self.program)
        if self._trace_key not in kept:
            kept[self._trace_key] = False
            kept[self._trace_key] = _traced_for_one_point(self.program, self.output_indices)
        return kept[self._trace_key]

    def _evaluate_traced(self, points: np.ndarray, eager_point: np.ndarray | None,
                         eager_outputs: list[np.ndarray]) -> list[np.ndarray] | None:
        """f at each point through one trace of f, or None (then the loop goes on eagerly)
        when f cannot be traced, or when the traced f disagrees with eager f at the given
        point or in its change to the last point evaluated eagerly (the trace's first use for
        this input, after one eager point)."""
        tf = tensorflow()
        slot = self.program.slots[self.slot_index]
        original = slot.value.numpy()
        self.program.announce(Phase(f"the evaluation of f traced by tf.function at {len(points)}"
                                    f" values of {slot.name}"))
        try:
            first_use = self.traced_point is None
            if first_use:
                assert eager_point is not None
                self.traced_point = self._point_function()
                if self.traced_point is False:
                    return None
                points = np.concatenate([original[None], eager_point[None], points])
            sources = [i for i, s in enumerate(self.program.slots) if s.differentiable]
            given = [tf.convert_to_tensor(self.program.slots[i].value) for i in sources]
            moved = sources.index(self.slot_index)
            rows = [self.traced_point(*given[:moved], tf.constant(point, dtype=slot.dtype),
                                      *given[moved + 1:]) for point in points]
            arrays = [np.stack([np.asarray(v, dtype=np.float64) for v in column])
                      for column in zip(*rows)]
            if first_use:
                eps = machine_eps(self.program.compute_dtype)
                _require_agreement(arrays, 0, self.centre_outputs, eps)
                _require_same_change([a[:2] for a in arrays], eager_outputs,
                                     self.centre_outputs, eps)
                arrays = [a[2:] for a in arrays]
            return arrays
        except Exception:  # noqa: BLE001 - f that cannot be traced is evaluated eagerly
            self.traced_point = False
            return None
        finally:
            if slot.is_variable:
                slot.value.assign(original)

    def evaluate_perturbations(
        self, h: np.ndarray, factors: tuple[float, ...] = STEP_FACTORS,
        elements: np.ndarray | None = None, progress: Callable[[int, int], None] | None = None,
    ) -> list[np.ndarray]:
        """f at x + factor*h along each element (all, or the listed flat ones), in chunks.

        Returns, per output, (len(factors) * k, *out) in the order of `points_along`.
        """
        slot = self.program.slots[self.slot_index]
        x = self.program.value_of(self.slot_index)
        index = np.arange(int(np.prod(slot.shape))) if elements is None else np.asarray(elements)
        per_chunk = max(1, self.chunk_size() // len(factors))
        parts: list[list[np.ndarray]] = [[] for _ in self.output_indices]
        for start in range(0, index.size, per_chunk):
            points = points_along(x, h, index[start:start + per_chunk], factors)
            if float32.applies(self.program.compute_dtype):  # the widths float32.py divides by
                points = float32.rounded(points)
            for bucket, values in zip(parts, self.evaluate(points)):
                bucket.append(values)
            if progress is not None:
                progress(min(index.size, start + per_chunk), index.size)
        return [p[0] if len(p) == 1 else np.concatenate(p) if p else np.zeros((0, *c.shape))
                for p, c in zip(parts, self.centre_outputs)]


# Inputs of up to this many elements are evaluated by calls of f, not by tf.vectorized_map: at
# most about 100 points (float32's 6 per element), and tracing vectorized_map took as long as
# 120 calls of a small f (measured on twenty 3-element functions).
EAGER_ELEMENTS = 16

# f is traced for the points left when there are at least TRACED_MIN_POINTS of them, each
# eager call takes at least TRACED_CALL_MIN_SECONDS and all of them longer than
# TRACING_PAYS_SECONDS: a traced call costs about 0.2 ms however small f is, a Keras model's
# a tenth of its eager call, and tracing about ten eager calls. Once traced, every later point
# goes through the trace (the retries at smaller steps come a few points at a time).
TRACING_PAYS_SECONDS, TRACED_CALL_MIN_SECONDS, TRACED_MIN_POINTS = 0.1, 0.002, 16

# How much larger than its input and outputs one vectorised evaluation may grow in memory.
BATCH_OVERHEAD = 16


def point_bytes(input_shape: Sequence[int], output_shapes: Sequence[Sequence[int]]) -> int:
    """Bytes of one evaluation point and its outputs, in float64."""
    return 8 * (int(np.prod(input_shape, dtype=np.int64))
                + sum(int(np.prod(s, dtype=np.int64)) for s in output_shapes))
