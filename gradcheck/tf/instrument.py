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
from dataclasses import dataclass, field
from typing import Any

from gradcheck.evidence import Location
from gradcheck.load.locations import format_location
from gradcheck.report import Spelled
from gradcheck.tf.runtime import tensorflow
from gradcheck.tf.site_lines import (
    caller_location,
    is_installed,
    is_library,
    return_location,
    source_location,
)

MAX_CALLS_KEPT = 4


class Slip(Spelled):
    """Which part of the grad_fn contract a violation breaks."""

    COUNT = "count"
    VARIABLES = "variables"
    VARIABLE_COUNT = "variable-count"
    DTYPE = "dtype"
    KEYWORDS = "keywords"


@dataclass
class Violation:
    """A broken grad_fn contract seen while TensorFlow computed a gradient."""

    kind: Slip
    message: str
    input_index: int | None = None
    location: Location | None = None  # where it was seen, when not at grad_fn (a call's line)


@dataclass
class Site:
    """One function decorated with tf.custom_gradient."""

    name: str
    forward: Callable[..., Any]
    definition: Location | None
    grad_fn_location: Location | None = None
    grad_fn_accepts_variables: bool = False
    # Concrete arguments of the first eager calls: what the per-site value check replays.
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    reads_variables: list[str] = field(default_factory=list)
    parameter_names: list[str] = field(default_factory=list)
    # The function as TensorFlow decorated it: what the per-site check differentiates.
    decorated: Callable[..., Any] | None = None
    # Where tf.Variables are created on each call: in the forward, or inside grad_fn.
    forward_variables: list[Location | None] = field(default_factory=list)
    grad_fn_variables: list[Location | None] = field(default_factory=list)
    # Which positional arguments f's sources flow into (seen under a tape), once one was seen.
    differentiated: set[int] | None = None
    key: Any = None
    # The line of the first call that passed keyword arguments.
    keyword_call: Location | None = None

    def add_violation(self, violation: Violation) -> None:
        if all(v.message != violation.message for v in self.violations):
            self.violations.append(violation)


@dataclass
class Observer:
    sites: list[Site] = field(default_factory=list)
    # While gradcheck replays a site on its own, which arguments it differentiates is its own.
    replaying: bool = False
    # False: custom gradients run untouched inside the block (--no-instrument).
    enabled: bool = True

    def site_for(self, f: Callable[..., Any]) -> Site | None:
        """The site of a decorated function (one per definition), None for TensorFlow's own."""
        code = getattr(inspect.unwrap(f), "__code__", None)
        if code is not None and is_library(code.co_filename):
            return None
        key = code if code is not None else f
        site = next((s for s in self.sites if s.key is key), None)
        if site is None:
            site = Site(getattr(f, "__name__", "custom_gradient"), f, source_location(f),
                        parameter_names=_parameter_names(f), key=key)
            self.sites.append(site)
        return site

    def start_check(self) -> None:
        """A new check begins: forget the calls and findings of the previous one."""
        for site in self.sites:
            site.calls.clear()
            site.violations.clear()
            site.reads_variables.clear()
            site.forward_variables.clear()
            site.grad_fn_variables.clear()


@dataclass(frozen=True)
class Checkpoint:
    """How much each site had recorded at one moment (see rollback)."""

    sizes: dict[int, tuple[int, int]]


def checkpoint() -> Checkpoint:
    sites = _active[-1].sites if _active else []
    return Checkpoint({id(site): (len(site.calls), len(site.violations)) for site in sites})


def rollback(mark: Checkpoint) -> None:
    """Forget what the sites recorded since the checkpoint: calls that gradcheck made in a
    dtype it then gave up (the per-site checks replay the recorded calls)."""
    for site in _active[-1].sites if _active else []:
        calls, violations = mark.sizes.get(id(site), (0, 0))
        del site.calls[calls:]
        del site.violations[violations:]


def violations_since(mark: Checkpoint, kind: Slip) -> list[Violation]:
    return [violation for site in (_active[-1].sites if _active else [])
            for violation in site.violations[mark.sizes.get(id(site), (0, 0))[1]:]
            if violation.kind == kind]


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


# The observers in force, innermost last (it gets the calls), and TensorFlow's own two
# implementations while they are replaced.
_active: list[Observer] = []
_saved: list[Callable[..., Any]] = []


def _parameter_names(function: Callable[..., Any]) -> list[str]:
    try:
        return list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return []


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
            Slip.COUNT,
            f"grad_fn of {site.name} returned {len(flat)} gradient(s) for {len(flat_args)}"
            f" input(s); it must return exactly one per input, in order" + (
                f" (only positional arguments are inputs, not {', '.join(keywords)} passed by"
                " keyword at this call: pass them positionally)" if keywords else ""),
            location=site.keyword_call if keywords else None,
        ))
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
                site.add_violation(Violation(
                    Slip.DTYPE,
                    f"grad_fn of {site.name} returned a {grad_dtype.name} gradient for input"
                    f" {name} of dtype {arg_dtype.name}; each gradient must have its input's"
                    f" dtype (tf.cast it)", index,
                ))
            grad = tf.cast(grad, arg_dtype)
        repaired.append(grad)
    return repaired


def _observed_grad_fn(site: Site, args: tuple[Any, ...], grad_fn: Callable[..., Any],
                      keywords: tuple[str, ...] = ()) -> Callable[..., Any]:
    site.grad_fn_location = site.grad_fn_location or return_location(grad_fn)
    site.grad_fn_accepts_variables = accepts_variables(grad_fn)

    def grad_wrapper(*upstreams: Any, variables: Any = None) -> Any:
        with _noting_variables(site.grad_fn_variables, getattr(grad_fn, "__code__", None)):
            return _checked_grad_fn(*upstreams, variables=variables)

    def _checked_grad_fn(*upstreams: Any, variables: Any = None) -> Any:
        eager = _is_eager(upstreams)
        if not variables:
            return _repair(site, args, grad_fn(*upstreams), eager, keywords)
        names = [v.name for v in variables]
        site.reads_variables = names
        if not site.grad_fn_accepts_variables:
            if eager:
                site.add_violation(Violation(
                    Slip.VARIABLES,
                    f"{site.name} reads tf.Variable(s) {', '.join(names)} but its grad_fn has no"
                    " `variables=None` keyword: TensorFlow refuses it ('grad_fn must accept"
                    " keyword argument variables'); add the keyword and return"
                    " (input_grads, variable_grads)",
                ))
            return _repair(site, args, grad_fn(*upstreams), eager), [None] * len(variables)
        returned = grad_fn(*upstreams, variables=variables)
        if not (isinstance(returned, (list, tuple)) and len(returned) == 2):
            if eager:
                site.add_violation(Violation(
                    Slip.VARIABLE_COUNT,
                    f"grad_fn of {site.name} takes variables= but did not return the pair"
                    " (input_grads, variable_grads)",
                ))
            return _repair(site, args, returned, eager), [None] * len(variables)
        input_grads, variable_grads = returned
        variable_grads = list(variable_grads) if isinstance(variable_grads, (list, tuple)) \
            else [variable_grads]
        if len(variable_grads) != len(variables) and eager:
            site.add_violation(Violation(
                Slip.VARIABLE_COUNT,
                f"grad_fn of {site.name} returned {len(variable_grads)} variable gradient(s)"
                f" for {len(variables)} variable(s) ({', '.join(names)}); return one per"
                " variable, in the order of `variables`",
            ))
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


def _note_call(observer: Observer, site: Site, f: Callable[..., Any], args: tuple[Any, ...],
               kwargs: dict[str, Any], eager: bool) -> tuple[str, ...]:
    """Record a call: its arguments (eager ones), which of them f differentiates (seen under
    a tape, eager or traced), and tensors of f passed by keyword (which TensorFlow does not
    treat as inputs); returns the keywords."""
    tf = tensorflow()
    if eager and len(site.calls) < MAX_CALLS_KEPT:
        if not site.calls:
            site.forward, site.decorated = f, tf.custom_gradient(f)
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
    passed = ", ".join(f"{key}=..." for key in keywords)
    if not any(isinstance(v, (tf.Tensor, tf.Variable)) for v in tf.nest.flatten(args)):
        what = (f"{site.name} is called with its tensors as keyword arguments ({passed}):"
                " TensorFlow treats only positional arguments as a custom_gradient's inputs, so"
                " its grad_fn is never called and the gradient silently comes from the forward"
                " ops instead")
    else:
        what = (f"{site.name} gets {', '.join(keywords)} by keyword ({passed}): TensorFlow treats"
                " only positional arguments as a custom_gradient's inputs, so no gradient flows"
                " to it through grad_fn (None) and grad_fn must return one gradient per"
                " positional argument only")
    site.keyword_call = site.keyword_call or caller_location()
    site.add_violation(Violation(Slip.KEYWORDS,
                                 f"{what}; pass {', '.join(keywords)} positionally",
                                 location=site.keyword_call))


def _observed(original: Callable[..., Any], eager: bool) -> Callable[..., Any]:
    """TensorFlow's eager (or graph) implementation of a custom_gradient call, observed."""

    def decorator(f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        observer = _active[-1] if _active else None
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


def installed(site: Site) -> bool:
    """Whether the site is defined in an installed package (a library such as larq or TFP)."""
    filename = getattr(site.key, "co_filename", None)
    return filename is not None and is_installed(filename)


def defines(site: Site, function: Callable[..., Any]) -> bool:
    """Whether `function` is the site itself (f is a custom gradient)."""
    code = getattr(inspect.unwrap(function), "__code__", None)
    return code is not None and code is site.key


@contextlib.contextmanager
def replaying() -> Iterator[None]:
    """gradcheck calls a site on its own: which arguments it differentiates is not f's."""
    observer = _active[-1] if _active else None
    if observer is None:
        yield
        return
    previous, observer.replaying = observer.replaying, True
    try:
        yield
    finally:
        observer.replaying = previous


@contextlib.contextmanager
def observing_custom_gradients(enabled: bool = True) -> Iterator[Observer]:
    """Observe every custom gradient called inside the block (a fresh observer each time),
    with TensorFlow's two implementations wrapped while any observer is active."""
    import importlib

    module: Any = importlib.import_module("tensorflow.python.ops.custom_gradient")
    observer = Observer(enabled=enabled)
    if not enabled and not _active:
        yield observer
        return
    if not _active:
        _saved[:] = [module._eager_mode_decorator, module._graph_mode_decorator]
        module._eager_mode_decorator = _observed(_saved[0], eager=True)
        module._graph_mode_decorator = _observed(_saved[1], eager=False)
    _active.append(observer)
    try:
        yield observer
    finally:
        _active.remove(observer)
        if not _active:
            module._eager_mode_decorator, module._graph_mode_decorator = _saved


def observing() -> bool:
    """Whether custom gradients called now are observed (their contract slips repaired)."""
    return bool(_active) and _active[-1].enabled
