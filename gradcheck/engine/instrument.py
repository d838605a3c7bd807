"""Observe every tf.custom_gradient while a check runs (the forward function, the arguments it
is called with, what its grad_fn returns), repairing contract slips that would otherwise crash
TensorFlow so that the rest of the checks can still run.

Whatever spelling decorated a function (`tf.custom_gradient`, `tensorflow.compat.v2`, a name
bound before gradcheck was imported, a library's own import), every call of it goes through
`_eager_mode_decorator` or `_graph_mode_decorator` of TensorFlow's custom_gradient module, looked
up when it is called: those two are wrapped for the duration of a check, and restored after."""

from __future__ import annotations

import contextlib
import functools
import inspect
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from gradcheck.engine.observer import (
    ACTIVE,
    Observer,
    Site,
    Slip,
    Violation,
    checkpoint,
    rollback,
    violations_since,
)
from gradcheck.engine.runtime import tensorflow
from gradcheck.engine.variables import VariableNames
from gradcheck.evidence import Location
from gradcheck.evidence.causes import ContractSlip
from gradcheck.forensics.site_lines import caller_location, return_location
from gradcheck.load.locations import format_location
from gradcheck.targets.generic_wrappers import wrapped_gradients

MAX_CALLS_KEPT = 4


# TensorFlow's own two implementations while they are replaced.
_saved: list[Callable[..., Any]] = []


@contextlib.contextmanager
def _noting_variables(found: list[Location | None], code: Any) -> Iterator[None]:
    """Record the line of every tf.Variable created inside `code` while the block runs."""
    tf = tensorflow()
    filename = getattr(code, "co_filename", None)

    def creator(next_creator: Callable[..., Any], **kwargs: Any) -> Any:
        frames = [f for f in traceback.extract_stack() if f.filename == filename]
        location = format_location(frames[-1].filename, frames[-1].lineno) if frames else None
        if location not in found:
            found.append(location)
        return next_creator(**kwargs)

    with tf.variable_creator_scope(creator):
        yield


def accepts_variables(function: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "variables" or p.kind == p.VAR_KEYWORD for p in parameters)


def _is_eager(values: Any) -> bool:
    tf = tensorflow()
    return tf.executing_eagerly() and all(
        not isinstance(v, tf.Tensor) or hasattr(v, "numpy") for v in tf.nest.flatten(values)
    )


def _snapshot(values: Any) -> Any:
    tf = tensorflow()
    return tf.nest.map_structure(
        lambda v: tf.constant(v.numpy()) if isinstance(v, (tf.Tensor, tf.Variable)) else v,
        values,
    )


def _repair(site: Site, args: tuple[Any, ...], grads: Any, eager: bool,
            keywords: tuple[str, ...] = ()) -> list[Any]:
    """Check count and dtype of the input gradients; return a list TensorFlow will accept."""
    tf = tensorflow()
    flat_args = tf.nest.flatten(args)
    # Counted as TensorFlow counts them: nested lists of gradients are flattened.
    flat = list(tf.nest.flatten(grads, expand_composites=False)) if isinstance(
        grads, (list, tuple)) else [grads]
    if len(flat) != len(flat_args) and eager:
        site.add_violation(Violation(
            Slip.COUNT, ContractSlip(site.name, len(flat), len(flat_args), keywords),
            location=site.keyword_call if keywords else None))
    flat = (flat + [None] * len(flat_args))[: len(flat_args)]
    repaired = []
    for index, (grad, arg) in enumerate(zip(flat, flat_args)):
        arg_dtype = getattr(arg, "dtype", None)
        grad_dtype = getattr(grad, "dtype", None)
        if grad is not None and arg_dtype is not None and grad_dtype is not None \
                and grad_dtype != arg_dtype and getattr(arg_dtype, "is_floating", False):
            if eager:
                name = (site.parameter_names[index] if index < len(site.parameter_names)
                        else f"#{index}")
                site.add_violation(Violation(Slip.DTYPE, ContractSlip(
                    site.name, input=name, dtype=grad_dtype.name, input_dtype=arg_dtype.name),
                    index))
            grad = tf.cast(grad, arg_dtype)
        repaired.append(grad)
    return repaired


def _observed_grad_fn(site: Site, args: tuple[Any, ...], grad_fn: Callable[..., Any],
                      keywords: tuple[str, ...] = ()) -> Callable[..., Any]:
    user_gradients = wrapped_gradients(site.forward, grad_fn)
    site.grad_fn_location = site.grad_fn_location or return_location(
        user_gradients[0] if user_gradients else grad_fn)
    if len(user_gradients) == len(site.parameter_names) > 1 and not site.input_grad_locations:
        site.input_grad_locations = {
            name: location for name, gradient in zip(site.parameter_names, user_gradients,
                                                     strict=True)
            if (location := return_location(gradient)) is not None}
    site.grad_fn_accepts_variables = accepts_variables(grad_fn)

    def grad_wrapper(*upstreams: Any, variables: Any = None) -> Any:
        if ACTIVE and ACTIVE[-1].reverse_gradient():
            site.grad_fn_ran = True
        with _noting_variables(site.grad_fn_variables, getattr(grad_fn, "__code__", None)):
            return _checked_grad_fn(*upstreams, variables=variables)

    def _checked_grad_fn(*upstreams: Any, variables: Any = None) -> Any:
        eager = _is_eager(upstreams)
        if not variables:
            return _repair(site, args, grad_fn(*upstreams), eager, keywords)
        named = VariableNames(site.forward)
        names = [named(v) for v in variables]
        if not site.grad_fn_accepts_variables:
            if eager:
                site.add_violation(Violation(
                    Slip.VARIABLES, ContractSlip(site.name, names=tuple(names))))
            return _repair(site, args, grad_fn(*upstreams), eager), [None] * len(variables)
        returned = grad_fn(*upstreams, variables=variables)
        if not (isinstance(returned, (list, tuple)) and len(returned) == 2):
            if eager:
                site.add_violation(Violation(
                    Slip.VARIABLE_COUNT, ContractSlip(site.name, paired=False)))
            return _repair(site, args, returned, eager), [None] * len(variables)
        input_grads, variable_grads = returned
        variable_grads = list(variable_grads) if isinstance(variable_grads, (list, tuple)) \
            else [variable_grads]
        if len(variable_grads) != len(variables) and eager:
            site.add_violation(Violation(Slip.VARIABLE_COUNT, ContractSlip(
                site.name, len(variable_grads), len(variables), tuple(names))))
        variable_grads = (variable_grads + [None] * len(variables))[: len(variables)]
        return _repair(site, args, input_grads, eager, keywords), variable_grads

    return grad_wrapper


def _differentiated(values: Any) -> bool:
    """Whether a tape active now watches (a tensor of) `values`: f's sources flow into it."""
    tf = tensorflow()
    tensors = [getattr(v, "handle", v) for v in tf.nest.flatten(values)
               if isinstance(v, (tf.Tensor, tf.Variable))]
    return bool(tensors) and bool(_record().should_record_backprop(tensors))


def _record() -> Any:
    import importlib

    return importlib.import_module("tensorflow.python.eager.record")


def _custom_gradient_module() -> Any:
    import importlib

    return importlib.import_module("tensorflow.python.ops.custom_gradient")


def _note_call(observer: Observer, site: Site, f: Callable[..., Any], args: tuple[Any, ...],
               kwargs: dict[str, Any], eager: bool) -> tuple[str, ...]:
    """Record a call: its arguments (eager ones), which of them f differentiates (seen under
    a tape, eager or traced), and tensors of f passed by keyword (which TensorFlow does not
    treat as inputs); returns the keywords."""
    if eager and len(site.calls) < MAX_CALLS_KEPT:
        if not site.calls:
            # TensorFlow's own decorator, not `tf.custom_gradient` (a user may have replaced it
            # at import with a wrapper that would wrap f a second time).
            site.forward, site.decorated = f, _custom_gradient_module().custom_gradient(f)
        site.calls.append((_snapshot(args), _snapshot(kwargs)))
    if not observer.replaying and _record().could_possibly_record():
        # Only a tape watching some argument tells (a forward accumulator alone tells nothing).
        watched = {index for index, arg in enumerate(args) if _differentiated(arg)}
        if watched:
            site.differentiated = watched | (site.differentiated or set())
        keywords = tuple(key for key, value in kwargs.items() if _differentiated(value))
        if keywords and eager:
            _keyword_violation(site, args, keywords)
    if kwargs and site.keyword_call is None:
        site.keyword_call = caller_location()
    return tuple(kwargs)


def _keyword_violation(site: Site, args: tuple[Any, ...], keywords: tuple[str, ...]) -> None:
    tf = tensorflow()
    positionally = any(isinstance(v, (tf.Tensor, tf.Variable)) for v in tf.nest.flatten(args))
    site.keyword_call = site.keyword_call or caller_location()
    site.add_violation(Violation(
        Slip.KEYWORDS, ContractSlip(site.name, names=keywords, positionally=positionally),
        location=site.keyword_call))


def _observed(original: Callable[..., Any], eager: bool) -> Callable[..., Any]:
    """TensorFlow's eager (or graph) implementation of a custom_gradient call, observed."""

    def decorator(f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        observer = ACTIVE[-1] if ACTIVE else None
        site = observer.site_for(f) if observer is not None and observer.enabled else None
        if observer is None or site is None:
            return original(f, args, kwargs)
        keywords = _note_call(observer, site, f, args, kwargs,
                              eager and _is_eager((args, kwargs)))
        code = getattr(inspect.unwrap(f), "__code__", None)

        @functools.wraps(f)
        def forward(*call_args: Any, **call_kwargs: Any) -> Any:
            with _noting_variables(site.forward_variables, code):
                result, grad_fn = f(*call_args, **call_kwargs)
            return result, _observed_grad_fn(site, call_args, grad_fn, keywords)

        return original(forward, args, kwargs)

    decorator.__wrapped__ = original  # type: ignore[attr-defined]
    return decorator


@contextlib.contextmanager
def observing_custom_gradients(enabled: bool = True) -> Iterator[Observer]:
    """Observe every custom gradient called inside the block (a fresh observer each time),
    with TensorFlow's two implementations wrapped while any observer is active."""
    module = _custom_gradient_module()
    observer = Observer(enabled=enabled)
    if not enabled and not ACTIVE:
        yield observer
        return
    if not ACTIVE:
        _saved[:] = [module._eager_mode_decorator, module._graph_mode_decorator]
        module._eager_mode_decorator = _observed(_saved[0], eager=True)
        module._graph_mode_decorator = _observed(_saved[1], eager=False)
    ACTIVE.append(observer)
    try:
        yield observer
    finally:
        ACTIVE.remove(observer)
        if not ACTIVE:
            module._eager_mode_decorator, module._graph_mode_decorator = _saved


def observing() -> bool:
    """Whether custom gradients called now are observed (their contract slips repaired)."""
    return bool(ACTIVE) and ACTIVE[-1].enabled


# The site model is engine/observer.py's; engine/binding.py and engine/sites.py use it through here.
__all__ = ["Site", "Slip", "checkpoint", "observing", "observing_custom_gradients",
           "rollback",
           "violations_since"]
