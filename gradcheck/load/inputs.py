"""Turn -i/--shape/--inputs/--upstream specifications into argument values (no TensorFlow)."""

from __future__ import annotations

import ast
import inspect
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from gradcheck.errors import InputError, LoadError
from gradcheck.load.arrays import numeric, read_array_file
from gradcheck.options import memory_cap_rule
from gradcheck.spelling import format_size
from gradcheck.targets.generic_wrappers import wrapped_forward
from gradcheck.targets.named import NamedArgument, OutputPath

KEYWORD_SPEC = re.compile(r"^([A-Za-z_]\w*)=(.*)$", re.DOTALL)
UPSTREAM_KEYWORDS = ("ones", "random")
WAYS_TO_GIVE_INPUTS = (
    "-i/--input VALUE, --shape 2,3, --inputs MOD:ATTR, or a '{name}_inputs' attribute"
    " in the target's module"
)


@dataclass(frozen=True)
class Arguments:
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    source: str = ""


def _from_literal(text: str, what: str) -> Any:
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise InputError(
            f"{what} {text!r} is neither a .npy/.npz file nor a literal such as '[1.0, 2.0]'"
        ) from exc
    return _literal_value(value, what, text)


def _literal_value(value: Any, what: str, text: str) -> Any:
    """A literal's value as an argument: a dict (one structured argument) keeps its keys, each
    value made an argument in turn."""
    if isinstance(value, (bool, str, bytes, int, float, complex)) or value is None:
        return value
    if isinstance(value, dict):
        return {key: _literal_value(item, what, text) for key, item in value.items()}
    try:
        array = np.asarray(value)
    except ValueError as exc:
        raise InputError(f"{what} {text!r} is not a rectangular array") from exc
    if array.dtype == object:
        raise InputError(f"{what} {text!r} is not a rectangular array of numbers")
    array = numeric(array, f"{what} {text!r}")
    # Floats stay Python floats, as written: a literal has no dtype of its own (TensorFlow
    # would make it float32), unlike a float64 .npy array.
    inexact = np.issubdtype(array.dtype, np.inexact)
    return array.tolist() if inexact else array


def looks_like_file(text: str) -> bool:
    return text.endswith((".npy", ".npz"))


def split_keyword(spec: str) -> tuple[str, str] | None:
    """(NAME, VALUE) for NAME=VALUE, unless the whole spec names an existing file."""
    match = KEYWORD_SPEC.match(spec)
    if match is None or (looks_like_file(spec) and Path(spec).is_file()):
        return None
    name, value = match.groups()
    return name, value


def parse_value(text: str, what: str = "input") -> Any:
    """A .npy array, a .npz dict, or a Python literal (arrays for lists, floats 0-d)."""
    if looks_like_file(text):
        return read_array_file(text, what)
    return _from_literal(text, what)


def _as_array(value: Any) -> np.ndarray | None:
    """The values of an array-like argument (NumPy, lists, tensors), or None for anything else."""
    try:
        if isinstance(value, (np.ndarray, float, complex, np.inexact, list, tuple)):
            return np.asarray(value)
        if hasattr(value, "numpy") and hasattr(value, "dtype"):  # a tensor or a variable
            return np.asarray(value.numpy())
    except (ValueError, TypeError):  # ragged lists and the like are passed through as given
        return None
    return None


def is_infinite_mask(array: np.ndarray) -> bool:
    """An array that is a mask holding infinities (1 or 0 where kept, -inf where not): an
    intentional argument, whose effect the non-finite check follows, not bad data."""
    if not np.issubdtype(array.dtype, np.floating):
        return False
    values = np.asarray(array, np.float64)
    infinite = values[np.isinf(values)]
    return bool(infinite.size and not np.isnan(values).any()
                and len(np.unique(np.sign(infinite))) == 1
                and len(np.unique(values[np.isfinite(values)])) <= 2)


def check_finite(name: str, value: Any) -> None:
    """A floating argument must have elements, all of them finite (or be a mask holding
    infinities)."""
    array = _as_array(value)
    if array is None or not np.issubdtype(array.dtype, np.inexact):
        return
    if array.size == 0:
        raise InputError(f"input {name} is empty (shape {array.shape}); there is nothing to"
                         " differentiate")
    if not np.all(np.isfinite(array)) and not is_infinite_mask(array):
        raise InputError(f"input {name} contains NaN or Inf; gradients need a finite point")


def parse_shape(text: str) -> tuple[int, ...]:
    cleaned = text.strip().strip("()[]")
    if cleaned in ("", "scalar"):
        return ()
    try:
        shape = tuple(int(part) for part in cleaned.split(",") if part.strip())
    except ValueError as exc:
        raise InputError(f"--shape {text!r} must be comma-separated integers, like 2,3") from exc
    if any(dim <= 0 for dim in shape):
        raise InputError(f"--shape {text!r}: every dimension must be positive")
    return shape


def _normalise_provided(value: Any, source: str) -> Arguments:
    if callable(value) and not hasattr(value, "shape"):
        try:
            value = value()
        except Exception as exc:
            raise InputError(f"{source}() raised {type(exc).__name__}: {exc}") from exc
    if isinstance(value, dict):
        return Arguments((), dict(value), source)
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], (tuple, list))
        and isinstance(value[1], dict)
    ):
        return Arguments(tuple(value[0]), dict(value[1]), source)
    if isinstance(value, (tuple, list)):
        return Arguments(tuple(value), {}, source)
    return Arguments((value,), {}, source)


def _from_specs(specs: Sequence[str]) -> Arguments:
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for spec in specs:
        keyword = split_keyword(spec)
        if keyword is not None:
            name, text = keyword
            if name in kwargs:
                raise InputError(f"keyword input {name!r} given twice")
            kwargs[name] = parse_value(text, f"input {name}")
            continue
        value = parse_value(spec, "input")
        if isinstance(value, dict) and looks_like_file(spec):
            kwargs.update(value)
        elif kwargs:
            raise InputError(f"positional input {spec!r} follows a keyword input")
        else:
            args.append(value)
    return Arguments(tuple(args), kwargs, "-i/--input")


def check_shape_fits(text: str, limit: int) -> None:
    """Refuse a --shape whose float64 argument alone would need more than `limit` bytes."""
    elements = math.prod(parse_shape(text))
    if elements * 8 > limit:
        raise InputError(f"--shape {text!r} is {elements:,} elements"
                         f" ({format_size(elements * 8)} as float64), more than a worker may"
                         f" hold ({format_size(limit)}: {memory_cap_rule()}); raise --max-memory"
                         " or give a smaller shape")


def _from_shapes(shapes: Sequence[str], seed: int) -> Arguments:
    rng = np.random.default_rng(seed)
    try:
        values = tuple(rng.standard_normal(parse_shape(s)).tolist() for s in shapes)
    except MemoryError as exc:
        raise InputError(f"--shape {', '.join(shapes)}: the random arguments do not fit in"
                         " memory") from exc
    return Arguments(values, {}, f"--shape (seed {seed})")


def resolve_arguments(
    function_name: str,
    module: ModuleType | None,
    *,
    input_specs: Sequence[str] = (),
    shapes: Sequence[str] = (),
    seed: int = 0,
    inputs_attr: str | None = None,
    load_attribute: Callable[[str], Any] | None = None,
    declared_shapes: Sequence[Any] = (),
    function: Callable[..., Any] | None = None,
) -> Arguments:
    """Pick the arguments by the documented precedence: -i, --shape, --inputs, convention,
    random arguments of the shapes a saved signature declares (a free size as 2), none for a
    `function` that takes none (a loss closure over variables: GPflow's training_loss).
    Keyword-only -i values combine with --shape (random positionals, given keywords)."""
    if input_specs:
        given = _from_specs(input_specs)
        if shapes and not given.args:
            shaped = _from_shapes(shapes, seed)
            return Arguments(shaped.args, given.kwargs, f"{shaped.source} and -i/--input")
        if shapes:
            raise InputError("positional inputs come from -i or from --shape, not both;"
                             " give keyword arguments with -i NAME=VALUE next to --shape")
        return given
    if shapes:
        return _from_shapes(shapes, seed)
    if inputs_attr:
        if load_attribute is None:
            raise InputError("--inputs needs a loader")
        try:
            value = load_attribute(inputs_attr)
        except LoadError as exc:
            raise InputError(f"--inputs {inputs_attr}: {exc.message}") from exc
        return _normalise_provided(value, inputs_attr)
    convention = f"{function_name}_inputs"
    if module is not None and hasattr(module, convention):
        return _normalise_provided(getattr(module, convention), convention)
    if declared_shapes:
        rng = np.random.default_rng(seed)
        values = tuple(_random_of(shape, rng) for shape in declared_shapes)
        return Arguments(values, {}, f"the signature's shapes (seed {seed})")
    if function is not None and _takes_no_arguments(function):
        return Arguments((), {}, f"none: {function_name} takes no arguments")
    raise InputError(
        f"no inputs for {function_name}: give "
        + WAYS_TO_GIVE_INPUTS.format(name=function_name)
    )


def _takes_no_arguments(function: Callable[..., Any]) -> bool:
    """A function (or bound method) whose signature has no parameters at all; a Keras layer
    or model takes inputs."""
    try:
        return not inspect.signature(function).parameters
    except (TypeError, ValueError):  # a builtin or an object inspect cannot read
        return False


def _random_of(declared: Any, rng: np.random.Generator) -> Any:
    """Random normal values of a declared shape (a free dimension as 2), or a dict or list of
    them for a structured argument."""
    if isinstance(declared, dict):
        return {key: _random_of(shape, rng) for key, shape in declared.items()}
    if isinstance(declared, list):
        return [_random_of(shape, rng) for shape in declared]
    return rng.standard_normal([d or 2 for d in declared]).tolist()


def _naming_signature(function: Callable[..., Any],
                      signature: inspect.Signature | None) -> inspect.Signature | None:
    """The signature that names the arguments: a Keras layer's `call` (its `__call__` takes
    only *args), else the function's own."""
    named_kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    generic = signature is not None and not any(
        p.kind in named_kinds for p in signature.parameters.values())
    # A custom gradient made by a library's generic (*args) wrapper: the user's function's.
    call = getattr(function, "call", None) if generic else None
    for named in (call, wrapped_forward(function) if generic else None):
        if callable(named):
            try:
                return inspect.signature(named)
            except (TypeError, ValueError):
                pass
    return signature


def name_arguments(function: Callable[..., Any], arguments: Arguments) -> list[NamedArgument]:
    """Bind arguments to the signature (an error on a mismatch) and name each one."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        signature = None
    display = getattr(function, "__name__", "function")
    if signature is not None:
        try:
            signature.bind(*arguments.args, **arguments.kwargs)
        except TypeError as exc:
            raise InputError(
                f"{display}{signature} cannot take the given inputs ({arguments.source}): {exc}"
            ) from exc
    positional: list[str] = []
    varargs = None
    naming = _naming_signature(function, signature)
    if naming is not None:
        for parameter in naming.parameters.values():
            if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
                positional.append(parameter.name)
            elif parameter.kind == parameter.VAR_POSITIONAL:
                varargs = parameter.name
    named = []
    for index, value in enumerate(arguments.args):
        if index < len(positional):
            name = positional[index]
        else:
            name = f"{varargs or 'args'}[{index - len(positional)}]"
        named.append(NamedArgument(name, value, index))
    named += [NamedArgument(key, value, None, key) for key, value in arguments.kwargs.items()]
    for argument in named:
        check_finite(argument.name, argument.value)
    return named


def parse_upstreams(specs: Sequence[str]) -> list[Any]:
    """Each spec as 'ones', 'random', an array, or a dict of arrays (from .npz)."""
    parsed: list[Any] = []
    for spec in specs:
        if spec in UPSTREAM_KEYWORDS:
            parsed.append(spec)
            continue
        value = parse_value(spec, "upstream")
        if isinstance(value, (int, float, complex, list)) and not isinstance(value, bool):
            value = np.asarray(value)
            value = value if np.iscomplexobj(value) else value.astype(np.float64)
        if not isinstance(value, (np.ndarray, dict)):
            raise InputError(f"upstream {spec!r} must be an array, 'ones' or 'random'")
        parsed.append(value)
    return parsed


def ones_like(shape: tuple[int, ...], is_complex: bool) -> np.ndarray:
    """tf.ones_like(y) as gradcheck holds y: 1 + 0j for a complex y (parts on a last axis)."""
    value = np.ones(shape)
    if is_complex:
        value[..., 1] = 0.0
    return value


def resolve_upstreams(
    parsed: Sequence[Any],
    outputs: Sequence[tuple[OutputPath, tuple[int, ...]]],
    seed: int,
    complex_outputs: Sequence[bool] = (),
) -> list[np.ndarray]:
    """One float64 upstream per output; shapes must match exactly (never broadcast). An
    upstream .npz names each output in full (y['mean']) or by its innermost key (mean). A
    complex output's upstream holds its parts on a last axis: 'ones' is tf.ones_like(y),
    1 + 0j."""
    names = [str(path) for path, _ in outputs]
    if len(parsed) == 1 and isinstance(parsed[0], dict):
        by_name = parsed[0]
        unknown = sorted(set(by_name) - set(names) - {path.last for path, _ in outputs})
        if unknown:
            raise InputError(
                f"upstream .npz has keys {unknown} that name no output; outputs are {names}"
            )
        specs: list[Any] = [by_name.get(str(path), by_name.get(path.last, "random"))
                            for path, _ in outputs]
    elif not parsed:
        specs = ["random"] * len(outputs)
    elif len(parsed) == 1 and isinstance(parsed[0], str):
        specs = list(parsed) * len(outputs)
    elif len(parsed) != len(outputs):
        raise InputError(
            f"{len(parsed)} --upstream values for {len(outputs)} outputs ({', '.join(names)});"
            " give one per output, in order"
        )
    else:
        specs = list(parsed)
    rng = np.random.default_rng(seed + 7919)
    resolved = []
    complex_outputs = list(complex_outputs) + [False] * (len(outputs) - len(complex_outputs))
    for (path, shape), spec, is_complex in zip(outputs, specs, complex_outputs):
        name = str(path)
        if isinstance(spec, dict):
            raise InputError("an upstream .npz must be the only --upstream")
        if isinstance(spec, str):
            value = (ones_like(shape, is_complex) if spec == "ones"
                     else rng.standard_normal(shape))
        else:
            value = np.asarray(spec)
            if value.dtype == np.bool_:
                raise InputError(f"upstream for {name} is boolean; it must be a float array")
            if np.iscomplexobj(value) and (*value.shape, 2) == tuple(shape):
                value = np.stack([value.real, value.imag], axis=-1)  # a complex output's parts
            elif np.iscomplexobj(value):
                raise InputError(f"upstream for {name} is complex but {name} is real; its"
                                 " imaginary part would be dropped: give a real upstream")
            if tuple(value.shape) != tuple(shape):
                raise InputError(
                    f"upstream for {name} has shape {tuple(value.shape)} but {name} has shape"
                    f" {tuple(shape)}; TensorFlow would silently broadcast it, so give an"
                    f" upstream of shape {tuple(shape)}"
                )
            if not np.all(np.isfinite(value)):
                raise InputError(f"upstream for {name} contains NaN or Inf")
        resolved.append(np.asarray(value, dtype=np.float64))
    return resolved
