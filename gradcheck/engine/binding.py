"""f's arguments bound as tensors, and the dtype f is checked in (float64 when f and its
gradients accept it, else the arguments' own)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gradcheck.engine import instrument
from gradcheck.engine.arrays import as_array
from gradcheck.engine.program import (
    COMPLEX_PARTS,
    FLOAT_DTYPES,
    REAL_TO_COMPLEX,
    Evaluation,
    Program,
    Slot,
    as_parts,
    first_line,
    flatten_outputs,
    function_name,
    function_raised,
    no_float_input,
)
from gradcheck.engine.runtime import tensorflow
from gradcheck.errors import InputError
from gradcheck.evidence.notes import (
    ComplexInput,
    DtypeFallback,
    NonFiniteInOwnDtype,
    Note,
    PassedThrough,
)
from gradcheck.report import Cause, Mistake
from gradcheck.targets.keras import compute_dtype
from gradcheck.targets.named import NamedArgument, leaf_name, structure_leaves


def _dtype_name(value: Any) -> str | None:
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return None
    return str(getattr(dtype, "name", dtype))


def _is_float(value: Any) -> bool:
    """A floating array, tensor or variable (a Keras layer has a dtype too, but is callable)."""
    return _dtype_name(value) in FLOAT_DTYPES and not callable(value)


def _is_complex(value: Any) -> bool:
    return _dtype_name(value) in COMPLEX_PARTS and not callable(value)


def _own_dtype(value: Any) -> str:
    """The dtype TensorFlow would give the argument: float32 for Python floats and lists,
    complex128 for Python complex numbers."""
    if isinstance(value, (list, tuple, float, complex)):
        return "complex128" if np.iscomplexobj(np.asarray(value)) else "float32"
    return _dtype_name(value) or "float32"


def _as_differentiable_candidate(value: Any) -> Any:
    """Lists and floats of numbers become arrays; anything else is left as given."""
    if isinstance(value, (list, tuple, float, complex)):
        try:
            array = np.asarray(value)
        except ValueError:
            return value
        if np.issubdtype(array.dtype, np.inexact):
            return array
    return value


def _build_slots(named: Sequence[NamedArgument], dtype: str | None) -> tuple[Slot, ...]:
    """One slot per argument; one per leaf of a structured argument (a dict of tensors),
    which the call rebuilds around them."""
    slots = []
    for argument in named:
        for keys, leaf in structure_leaves(argument.value):
            if not keys:
                slots.append(_slot(argument, dtype))
                continue
            name = leaf_name(argument.name, keys)
            slot = _slot(replace(argument, name=name, value=leaf), dtype)
            slots.append(replace(slot, keys=keys, structure=argument.value))
    return tuple(slots)


def _slot(argument: NamedArgument, dtype: str | None) -> Slot:
    tf = tensorflow()
    value = _as_differentiable_candidate(argument.value)
    if isinstance(value, (tf.RaggedTensor, tf.SparseTensor)) and _is_float(value):
        kind, values = (("tf.RaggedTensor", "flat_values") if isinstance(value, tf.RaggedTensor)
                        else ("tf.SparseTensor", "values"))
        raise InputError(f"{argument.name} is a {kind}: gradcheck differentiates dense tensors;"
                         f" pass its .{values} and rebuild it inside f")
    keyword = argument.keyword
    if isinstance(value, tf.Variable) and _is_float(value):
        target = dtype or value.dtype.name
        copy = tf.Variable(tf.cast(value, target), name=value.name.split(":")[0])
        return Slot(argument.name, argument.position, keyword, copy, True, target,
                    tuple(copy.shape), is_variable=True, own_dtype=value.dtype.name)
    if _is_float(value) and not isinstance(value, tf.Variable):
        target = dtype or _own_dtype(argument.value)
        tensor = tf.cast(tf.convert_to_tensor(value), target)
        return Slot(argument.name, argument.position, keyword, tensor, True, target,
                    tuple(tensor.shape), own_dtype=_own_dtype(argument.value))
    if _is_complex(value):
        # A complex tf.Variable too: f gets its value as a complex tensor, built from the
        # (real, imaginary) parts gradcheck watches (a variable copied from them would cut
        # the path).
        parts = dtype or COMPLEX_PARTS[_own_dtype(argument.value)]
        tensor = tf.cast(as_parts(tf.convert_to_tensor(value)), parts)
        return Slot(argument.name, argument.position, keyword, tensor, True, parts,
                    tuple(tensor.shape), complex_dtype=REAL_TO_COMPLEX[parts],
                    note=ComplexInput(argument.name))
    name = (f"a {type(value).__name__}" if callable(value)
            else _dtype_name(value) or type(value).__name__)
    shape = tuple(np.shape(value)) if hasattr(value, "shape") else ()
    return Slot(argument.name, argument.position, keyword, argument.value, False, name,
                shape, note=PassedThrough(argument.name, name))


def _candidate_dtypes(dtype_mode: str) -> list[str | None]:
    """The dtypes to try in order; None is each argument's own (a literal's is float32). An
    explicit float64 is the user's choice: checked in it, with no fallback."""
    if dtype_mode == "auto":
        return ["float64", None]
    if dtype_mode == "float64":
        return ["float64"]
    if dtype_mode == "float32":
        return ["float32"]
    raise InputError(f"--dtype must be auto, float32 or float64, not {dtype_mode!r}")


@dataclass(frozen=True)
class Gradients:
    """What one taped call of f and tape.gradient (TensorFlow's implicit upstream) gave: why
    they could not be taken (a grad_fn raising, or returning another dtype than its input's),
    or whether f's values and their gradients are finite."""

    problem: str | Cause | None
    finite_values: bool = True
    finite_gradients: bool = True


def _finite(tensors: Sequence[Any]) -> bool:
    tf = tensorflow()
    return all(t is None or bool(np.all(np.isfinite(as_array(tf.convert_to_tensor(t)))))
               for t in tensors)


def _gradients_in(program: Program) -> Gradients:
    tf = tensorflow()
    mark = instrument.checkpoint()
    try:
        with tf.GradientTape() as tape:
            for slot in program.sources:
                tape.watch(slot.value)
            leaves = [leaf for leaf in flatten_outputs(program.call()) if leaf.differentiable]
        gradients = tape.gradient([leaf.tensor for leaf in leaves],
                                  [slot.value for slot in program.sources])
    except Exception as exc:
        return Gradients(first_line(exc))
    slips = instrument.violations_since(mark, instrument.Slip.DTYPE)
    if slips:
        return Gradients(Cause(Mistake.DTYPE, facts=slips[0].slip))
    return Gradients(None, _finite([leaf.tensor for leaf in leaves]), _finite(gradients))


def _non_finite_in_own_dtype(function: Callable[..., Any], programs: Sequence[Program],
                             promoted: Program, gradients: Gradients) -> Prepared | None:
    """f in its arguments' own dtype when its value or gradient is NaN or infinite there and
    finite in float64: promotion must not hide what f gives in the user's own dtype."""
    own = programs[-1]
    if own is promoted or not (gradients.finite_values and gradients.finite_gradients):
        return None
    mark = instrument.checkpoint()
    in_own = _gradients_in(own)
    instrument.rollback(mark)
    if in_own.problem is not None or (in_own.finite_values and in_own.finite_gradients):
        return None
    return Prepared(own, own.call(), (NonFiniteInOwnDtype(
        function_name(function), promoted.compute_dtype, own.compute_dtype,
        gradients=in_own.finite_values),))


def _candidate_programs(function: Callable[..., Any], named: Sequence[NamedArgument],
                        dtype_mode: str, evaluation: Evaluation) -> list[Program]:
    programs: list[Program] = []
    for dtype in _candidate_dtypes(dtype_mode) + _policy_dtypes(named):
        slots = _build_slots(named, dtype)
        program = Program(function, slots, replace(evaluation,
                                                   dtype=dtype or _common_dtype(slots)))
        if all(p.compute_dtype != program.compute_dtype for p in programs):
            programs.append(program)
    return programs


def _policy_dtypes(named: Sequence[NamedArgument]) -> list[str | None]:
    """The low-precision compute dtypes of Keras layers or models among the arguments (a
    mixed_bfloat16 model): where f mixes their outputs with NumPy arguments, TensorFlow
    converts those to the layer's dtype, as gradcheck's tensors in float32 would not be."""
    found: list[str | None] = []
    for argument in named:
        dtype = compute_dtype(argument.value)
        if callable(argument.value) and dtype in ("float16", "bfloat16") and dtype not in found:
            found.append(dtype)
    return found


def _without_float_arguments(program: Program) -> None:
    """f may still differentiate the variables it reads; one that cannot even run on its
    arguments is an input error, not a finding."""
    try:
        program.call()
    except (Exception, SystemExit) as exc:
        raise no_float_input(program) from exc


@dataclass(frozen=True)
class Prepared:
    """f bound to its arguments, the result of its first call, and what its dtype choice
    has to say."""

    program: Program
    result: Any
    notes: tuple[Note, ...] = ()


def prepare(function: Callable[..., Any], named: Sequence[NamedArgument], dtype_mode: str,
            evaluation: Evaluation | None = None) -> Prepared:
    """Bind the arguments and call f once, in float64 when f and its gradients accept it
    (the evaluation's dtype is chosen here; the rest of it is kept).

    Promotion is gradcheck's choice, so it must never cause a finding nor hide one: when f or
    a grad_fn raises or mixes dtypes in float64 only, or f's value or gradient is NaN or
    infinite in its arguments' own dtype only, f is checked in that dtype.
    """
    programs = _candidate_programs(function, named, dtype_mode, evaluation or Evaluation())
    if not programs[0].sources:
        _without_float_arguments(programs[0])
    # The dtype, its error, whether in gradients.
    problems: list[tuple[str, str | Cause, bool]] = []
    ran: list[Program] = []
    errors: dict[str, BaseException] = {}
    for program in programs:
        mark = instrument.checkpoint()
        try:
            result = program.call()
        except (Exception, SystemExit) as exc:  # the user's function raised (or called exit)
            instrument.rollback(mark)
            problems.append((program.compute_dtype, first_line(exc), False))
            errors[program.compute_dtype] = exc
            continue
        gradients = _gradients_in(program) if len(programs) > 1 else Gradients(None)
        problem = gradients.problem
        if problem is None:
            if not problems:
                return _non_finite_in_own_dtype(function, programs, program, gradients) or \
                    Prepared(program, result)
            return Prepared(program, result, (DtypeFallback(
                function_name(function), *problems[0][:2], program.compute_dtype,
                gradients=problems[0][2]),))
        instrument.rollback(mark)
        problems.append((program.compute_dtype, problem, True))
        ran.append(program)
    if not ran:
        # What the user sees calling f: the error in the arguments' own dtype.
        own = _common_dtype(_build_slots(named, None))
        raise function_raised(function, errors.get(own, next(iter(errors.values()))))
    # The problem is the same in every dtype: the user's own, reported in the first one.
    return Prepared(ran[0], ran[0].call())


def _common_dtype(slots: Sequence[Slot]) -> str:
    dtypes = [slot.dtype for slot in slots if slot.differentiable]
    for candidate in ("float16", "bfloat16", "float32"):
        if candidate in dtypes:
            return candidate
    return "float64"
