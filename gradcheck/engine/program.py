"""The user's function bound to its arguments as tensors (binding.py binds them): how it is
evaluated, its calls, its outputs by path."""

from __future__ import annotations

import functools
import itertools
import re
import traceback
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gradcheck.engine.runtime import tensorflow, variable_scope_kept
from gradcheck.errors import FunctionError, InputError, Phase
from gradcheck.evidence import Location
from gradcheck.evidence.notes import Note
from gradcheck.load.locations import exception_location
from gradcheck.spelling import Spelled
from gradcheck.targets.named import OutputPath, pack

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
# A complex tensor is checked as the real tensor of its (real, imaginary) parts, stacked on a
# new last axis: finite differences move each part on its own, and autodiff through
# tf.complex, tf.math.real and tf.math.imag applies TensorFlow's convention for complex
# gradients (∂L/∂Re z + i ∂L/∂Im z), so any grad_fn that breaks it shows as a wrong value.
COMPLEX_PARTS = {"complex64": "float32", "complex128": "float64"}
REAL_TO_COMPLEX = {"float32": "complex64", "float64": "complex128"}
# TensorFlow's op errors start with the graph function's name and end with the op's (empty) name.
_TF_ERROR_NOISE = re.compile(r"\{\{function_node [^}]*\}\}\s*|\s*name:\s*$")
_ANSI_CODES = re.compile(r"\x1b\[[0-9;]*m")
_KERAS_WRAPPER = "Exception encountered when calling"
# What TensorFlow says when a Keras 3 variable (keras.Variable, whose dtype is a string) is
# given where it takes a tf.Variable: tf.autodiff.ForwardAccumulator's primals, tape.watch.
_KERAS_VARIABLE = re.compile(r"'str' object has no attribute 'is_floating'"
                             r"|of type 'Variable', not tf\.Tensor or tf\.Variable")


class SlotKind(Spelled):
    """What a slot is to f, spelled as the report's input kind."""

    ARGUMENT = "argument"  # one of its arguments (a tf.Variable passed in included)
    VARIABLE = "variable"  # a trainable tf.Variable f reads: a source, not an argument


class Origin(Spelled):
    """Where an output leaf's value comes from."""

    TENSOR = "tensor"
    NUMPY = "numpy"
    PYTHON = "python"
    NONE = "none"


@dataclass(frozen=True)
class Slot:
    """One argument of the user's function, or a variable it reads."""

    name: str
    position: int | None
    keyword: str | None
    value: Any
    differentiable: bool
    dtype: str
    shape: tuple[int, ...]
    is_variable: bool = False
    note: Note | None = None
    kind: SlotKind = SlotKind.ARGUMENT
    # A complex argument's dtype: `value` then holds its (real, imaginary) parts.
    complex_dtype: str | None = None
    # The dtype the user gave (float32 for a literal): what promotion to float64 replaced.
    own_dtype: str | None = None
    # A leaf of a structured argument (a dict of tensors): the keys down to it, and the
    # argument as given, which the call rebuilds around its leaves.
    keys: tuple[Any, ...] = ()
    structure: Any = None

    @property
    def argument(self) -> bool:
        return self.kind is SlotKind.ARGUMENT

    @property
    def user_shape(self) -> tuple[int, ...]:
        return self.shape[:-1] if self.complex_dtype else self.shape

    @property
    def user_dtype(self) -> str:
        return self.complex_dtype or self.dtype


@dataclass(frozen=True)
class OutputLeaf:
    path: OutputPath
    tensor: Any
    differentiable: bool
    origin: Origin
    reason: str | None = None
    # A complex output's dtype: `tensor` then holds its (real, imaginary) parts.
    complex_dtype: str | None = None

    @property
    def name(self) -> str:
        return str(self.path)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.tensor.shape)

    @property
    def dtype(self) -> str:
        return str(self.tensor.dtype.name)


def user_traceback(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


def as_parts(tensor: Any) -> Any:
    """A complex tensor as the real tensor of its parts, on a new last axis."""
    tf = tensorflow()
    return tf.stack([tf.math.real(tensor), tf.math.imag(tensor)], axis=-1)


def from_parts(parts: Any) -> Any:
    tf = tensorflow()
    return tf.complex(parts[..., 0], parts[..., 1])


def _call(function: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    return function(*args, **kwargs)


@functools.cache
def _autographed_call() -> Any:
    """`_call` converted by AutoGraph, once per process."""
    return tensorflow().autograph.to_graph(_call)


@dataclass(frozen=True)
class Untraceable:
    """Why f must never run inside a tf.function trace, and the user's line that makes it so."""

    reason: str
    location: Location | None = None


class NotTraceable(ValueError):
    """f is not run inside a tf.function trace: tracing it would fail (see Program); the
    error carries the user's line (exception_location reads it)."""

    def __init__(self, untraceable: Untraceable) -> None:
        super().__init__(untraceable.reason)
        self.location = untraceable.location


@dataclass(frozen=True)
class Evaluation:
    """How the checks evaluate f, set once from the options; a dtype fallback is a new one."""

    # The dtype finite-difference steps and tolerances are sized for.
    dtype: str = "float64"
    # False: no pfor, no vectorized_map (a retry after TensorFlow crashed while vectorising).
    vectorise: bool = True
    # Which sources to differentiate: "all", "inputs" (arguments), "variables", or a name.
    wrt: str = "all"
    # Told what is about to run, so that a crash or a time-out can name it.
    phase: Callable[[Phase | str], None] | None = None

    def announce(self, what: Phase | str) -> None:
        if self.phase is not None:
            self.phase(what)


@dataclass(frozen=True)
class Program:
    """The function with its arguments; float arguments are TensorFlow tensors or variables."""

    function: Callable[..., Any]
    slots: tuple[Slot, ...]
    evaluation: Evaluation
    # Why f must never run inside a tf.function trace (found in its eager calls), or None.
    untraceable: Untraceable | None = None

    @property
    def compute_dtype(self) -> str:
        return self.evaluation.dtype

    def announce(self, what: Phase | str) -> None:
        self.evaluation.announce(what)

    def in_dtype(self, dtype: str) -> Program:
        """The same program, its steps and tolerances sized for another dtype."""
        return replace(self, evaluation=replace(self.evaluation, dtype=dtype))

    @property
    def sources(self) -> list[Slot]:
        return [slot for slot in self.slots if slot.differentiable]

    def call(self, replacements: dict[int, Any] | None = None, fresh: bool = False) -> Any:
        """f(*args, **kwargs), with `replacements` for some arguments (index -> value);
        `fresh`: the replacements are tensors made for this call (see `arguments`)."""
        self._refuse_trace()
        args, kwargs = self.arguments(replacements, fresh)
        with variable_scope_kept():
            return self.function(*args, **kwargs)

    def _refuse_trace(self) -> None:
        """Raises NotTraceable inside a tf.function trace of an untraceable f."""
        if self.untraceable is not None and tensorflow().inside_function():
            raise NotTraceable(self.untraceable)

    def call_converted(self, replacements: dict[int, Any] | None = None) -> Any:
        """`call` inside a tf.function traced without AutoGraph, f converted by AutoGraph as
        tf.function would convert it (a Python `if` on a tensor becomes tf.cond), but not
        gradcheck's code around it: converting that costs about a second in a new process."""
        self._refuse_trace()
        args, kwargs = self.arguments(replacements)
        try:
            with variable_scope_kept():
                return _autographed_call()(self.function, args, kwargs)
        except Exception as exc:
            # As tf.function does: the error names the user's lines, not AutoGraph's rewrite.
            metadata = getattr(exc, "ag_error_metadata", None)
            if metadata is None:
                raise
            raise metadata.to_exception(exc) from None

    def arguments(self, replacements: dict[int, Any] | None = None, fresh: bool = False
                  ) -> tuple[list[Any], dict[str, Any]]:
        """The positional and keyword arguments of one call, each tensor a new tensor object;
        made inside the tape that is to see through them.

        Libraries cache results by input tensor identity (TFP bijectors): a reused tensor
        would return the previous call's output, recorded on no tape. tf.identity keeps the
        path to the watched tensor, so tapes and forward accumulators see through it; a
        `fresh` replacement, made for this call, is new already (an identity under a forward
        accumulator costs a JVP of its own).
        """
        tf = tensorflow()
        replacements = replacements or {}
        given: dict[tuple[int | None, str | None], Any] = {}
        structures: dict[tuple[int | None, str | None], tuple[Any, dict[Any, Any]]] = {}
        for index, slot in enumerate(self.slots):
            if not slot.argument:
                continue
            value = replacements.get(index, slot.value)
            if slot.complex_dtype is not None:
                value = from_parts(value)
            elif isinstance(value, tf.Tensor) and not (fresh and index in replacements):
                value = tf.identity(value)
            place = (slot.position, slot.keyword)
            given[place] = value
            if slot.keys:
                structures.setdefault(place, (slot.structure, {}))[1][slot.keys] = value
        for place, (structure, leaves) in structures.items():
            given[place] = pack(structure, leaves)
        args = [value for (_, keyword), value in given.items() if keyword is None]
        kwargs = {keyword: value for (_, keyword), value in given.items() if keyword is not None}
        return args, kwargs

    def value_of(self, index: int) -> np.ndarray:
        """An argument's current value, as float64."""
        return np.asarray(self.slots[index].value.numpy(), dtype=np.float64)

    def call_at(self, values: dict[int, np.ndarray]) -> Any:
        """f with these arguments moved to the given values (variables are assigned for the
        call and restored after it)."""
        tf = tensorflow()
        replacements: dict[int, Any] = {}
        saved: dict[int, Any] = {}
        try:
            for index, value in values.items():
                slot = self.slots[index]
                tensor = tf.constant(value, dtype=slot.dtype)
                if slot.is_variable:
                    saved[index] = slot.value.numpy()
                    slot.value.assign(tensor)
                else:
                    replacements[index] = tensor
            return self.call(replacements, fresh=True)
        finally:
            for index, original in saved.items():
                self.slots[index].value.assign(original)


def no_float_input(program: Program) -> InputError:
    kinds = ", ".join(f"{s.name} is {s.dtype}" for s in program.slots) or "no arguments"
    return InputError(f"no floating-point input to differentiate ({kinds}); write floats"
                      " like '[1.0, 2.0]'")


def function_raised(function: Callable[..., Any], exc: BaseException,
                    when: str = "") -> FunctionError:
    """The one-line error for an exception from the user's function, at the user's line."""
    where = exception_location(exc)
    at = f" (at {where})" if where else ""
    error = first_line(exc).rstrip(".") if when else first_line(exc)
    hint = ("; a Keras 3 variable (keras.Variable) went where TensorFlow takes a tf.Variable or"
            " a tensor: pass its .value, the tf.Variable it holds"
            if _KERAS_VARIABLE.search(str(exc)) else "")
    return FunctionError(f"{function_name(function)} raised {error}{when}{at}{hint}",
                         user_traceback=user_traceback(exc))


def function_name(function: Callable[..., Any]) -> str:
    """f's name: a function's __name__, a Keras layer's or model's name."""
    return str(getattr(function, "__name__", None) or getattr(function, "name", None) or "f")


def _shortened(text: str, limit: int = 200) -> str:
    """At most `limit` characters, cut after a whole word and marked."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0].rstrip(" ,;:") + " …"


def first_line(exc: BaseException) -> str:
    """The error in one line; for a tf.function's 'in user code:' report, its last line (the
    underlying error); for Keras's 'Exception encountered when calling' wrapper, the error it
    wraps, with the layer named."""
    lines = [line.strip() for line in _ANSI_CODES.sub("", str(exc)).strip().splitlines()
             if line.strip()]
    layer = None
    if lines and lines[0].startswith(_KERAS_WRAPPER) and len(lines) > 1:
        layer = lines[0].removeprefix(_KERAS_WRAPPER).strip(" .:")
        lines = list(itertools.takewhile(lambda line: "rguments received by" not in line,
                                         lines[1:])) or lines
    if lines and lines[0] == "in user code:" and len(lines) > 1:
        message = _shortened(_TF_ERROR_NOISE.sub("", lines[-1]).strip())
    else:
        line = _shortened(_TF_ERROR_NOISE.sub("", lines[0]).strip()) if lines else ""
        message = f"{type(exc).__name__}: {line}" if line else type(exc).__name__
    return message + (f" (in {layer})" if layer else "")


def flatten_outputs(result: Any, root: str = "y") -> list[OutputLeaf]:
    """Every leaf of the result at its path (y, y[1], y['mean']), judged differentiable or not."""
    return _flatten(result, OutputPath(root))


def _flatten(result: Any, path: OutputPath) -> list[OutputLeaf]:
    if isinstance(result, dict):
        return [leaf for key, value in result.items() for leaf in _flatten(value, path.child(key))]
    if isinstance(result, (tuple, list)):
        return [leaf for index, value in enumerate(result)
                for leaf in _flatten(value, path.child(index))]
    return [_leaf(result, path)]


def _leaf(result: Any, path: OutputPath) -> OutputLeaf:
    tf = tensorflow()
    if result is None:
        return OutputLeaf(path, None, False, Origin.NONE, "is None")
    if isinstance(result, (tf.Tensor, tf.Variable)):
        tensor = tf.convert_to_tensor(result)
        if tensor.dtype.name in COMPLEX_PARTS:
            return OutputLeaf(path, as_parts(tensor), True, Origin.TENSOR,
                              complex_dtype=tensor.dtype.name)
        if tensor.dtype.name not in FLOAT_DTYPES:
            reason = (f"is a tensor of dtype {tensor.dtype.name}; only floating-point outputs"
                      " have gradients")
            return OutputLeaf(path, tensor, False, Origin.TENSOR, reason)
        return OutputLeaf(path, tensor, True, Origin.TENSOR)
    origin = Origin.NUMPY if isinstance(result, (np.ndarray, np.generic)) else Origin.PYTHON
    try:
        array = np.asarray(result)
    except Exception:
        array = np.asarray(None)
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        return OutputLeaf(path, None, False, origin, f"is a {type(result).__name__}, not a tensor")
    if not np.issubdtype(array.dtype, np.floating):
        reason = f"is an integer {type(result).__name__}; only floating outputs have gradients"
        return OutputLeaf(path, tf.constant(array), False, origin, reason)
    return OutputLeaf(path, tf.constant(array), True, origin)


def output_base(program: Program) -> str:
    """Outputs are y, y[0], y['mean']... unless an argument is already called y."""
    return "out" if any(slot.name == "y" for slot in program.slots) else "y"


def path_ends(result: Any) -> list[Any]:
    """The outputs of f whose paths from the input matter: its differentiable ones, else (f
    returning only tf.argsort's integer ranks) the path to those is what is cut."""
    tf = tensorflow()
    flat = flatten_outputs(result)
    return [leaf.tensor for leaf in flat if leaf.differentiable] or [
        leaf.tensor for leaf in flat if isinstance(leaf.tensor, tf.Tensor)]


def kept_with(program: Program) -> dict[Hashable, Any]:
    """What is found out about this program object (never about a point), kept while it
    lives: every input's evaluator of one check shares it."""
    kept = _KEPT.get(id(program))
    if kept is None:
        kept = _KEPT[id(program)] = {}
        weakref.finalize(program, _KEPT.pop, id(program), None)
    return kept


_KEPT: dict[int, dict[Hashable, Any]] = {}
