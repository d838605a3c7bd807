"""The user's functions behind a generic custom-gradient wrapper: a decorator factory (as
geomstats' `autodiff.custom_gradient(*grad_funcs)`) hands tf.custom_gradient a closure
`(*args, **kwargs)` that calls the user's function, and a grad_fn that calls the user's
gradient functions; the site is the user's function, its grad_fn line the user's gradient."""

from __future__ import annotations

import dis
import functools
import inspect
from collections.abc import Callable, Iterator
from types import CodeType
from typing import Any

from gradcheck.user_code import is_user_file


def _user_function(value: Any) -> Callable[..., Any] | None:
    function = inspect.unwrap(value) if callable(value) else None
    code = getattr(function, "__code__", None)
    if not inspect.isfunction(function) or code is None or not is_user_file(code.co_filename):
        return None
    return function


def _closure(function: Callable[..., Any]) -> dict[str, Any]:
    code = getattr(function, "__code__", None)
    cells = getattr(function, "__closure__", None) or ()
    if code is None:
        return {}
    values = {}
    for name, cell in zip(code.co_freevars, cells, strict=False):
        try:
            values[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    return values


def _generic(function: Callable[..., Any]) -> bool:
    """A closure `(*args, **kwargs)` that hands on whatever it gets; one with parameters of its
    own before *args (perturb_and_apply's `(x, *args)`, which calls a function of its closure
    that may be another custom gradient) is a custom gradient of its own."""
    code = getattr(function, "__code__", None)
    return code is not None and bool(code.co_flags & inspect.CO_VARARGS) and bool(
        getattr(function, "__closure__", None)) and code.co_argcount == 0


@functools.lru_cache(maxsize=256)
def _free_names_read(code: CodeType) -> tuple[str, ...]:
    """The closure variables `code` reads, in order (disassembled once per code object: a
    wrapper is looked through on every call of its custom gradient)."""
    return tuple(instruction.argval for instruction in dis.get_instructions(code)
                 if instruction.opname == "LOAD_DEREF")


def wrapped_forward(f: Callable[..., Any]) -> Callable[..., Any] | None:
    """The user's function that a generic wrapper f calls first (the first function of its
    closure that its own code reads), None when f is not such a wrapper."""
    wrapper = inspect.unwrap(f)
    if not _generic(wrapper):
        return None
    closure = _closure(wrapper)
    for name in _free_names_read(wrapper.__code__):
        if name in closure:
            function = _user_function(closure[name])
            if function is not None and function is not wrapper:
                return function
    return None


def _functions(values: dict[str, Any]) -> Iterator[Callable[..., Any]]:
    for value in values.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            function = _user_function(item)
            if function is not None:
                yield function


def wrapped_gradients(f: Callable[..., Any], grad_fn: Callable[..., Any]
                      ) -> list[Callable[..., Any]]:
    """The user's gradient functions that a generic wrapper's grad_fn calls (from grad_fn's
    closure, else the wrapper's), in order; [] when f is not a generic wrapper."""
    forward = wrapped_forward(f)
    if forward is None:
        return []
    wrapper = inspect.unwrap(f)
    for values in (_closure(grad_fn), _closure(wrapper)):
        found = [function for function in _functions(values)
                 if function is not forward and function is not wrapper]
        if found:
            return found
    return []


_CONSTANTS = (bool, int, float, complex, str, bytes, type(None))


def _layers(f: Callable[..., Any]) -> Iterator[Callable[..., Any]]:
    """f and the functions it wraps (functools.wraps' `__wrapped__` chain), outermost first."""
    seen: set[int] = set()
    layer: Any = f
    while layer is not None and id(layer) not in seen:
        seen.add(id(layer))
        yield layer
        layer = getattr(layer, "__wrapped__", None)


def wrapper_variant(f: Callable[..., Any]) -> tuple[Any, ...]:
    """What tells apart two functions handed to tf.custom_gradient that are named by the same
    user function: the code of each function their wrappers call from their closures (a
    decorator without functools.wraps around different functions) and the constants the
    wrappers of f hold (`scale(-1.0)` around the one `scale(1.0)` wraps). A function's own
    constants are not compared: one defined inside f may capture a value per call."""
    layers = list(_layers(f))
    variant: list[Any] = []
    for depth, layer in enumerate(layers):
        for name, value in sorted(_closure(layer).items()):
            function = _user_function(value)
            if function is not None and function is not layer:
                variant.append((depth, name, function.__code__))
            elif depth < len(layers) - 1 and isinstance(value, _CONSTANTS):
                variant.append((depth, name, value))
    return tuple(variant)

