"""Observe every tf.custom_gradient while the user's module loads and runs (the forward
function, the upstreams its grad_fn receives and what it returns), repairing contract slips
that would otherwise crash TensorFlow so that the rest of the checks can still run."""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import textwrap
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gradcheck.load.locations import format_location
from gradcheck.tf.runtime import tensorflow

MAX_CALLS_KEPT = 4


@dataclass
class Violation:
    """A broken grad_fn contract seen while TensorFlow computed a gradient."""

    kind: str  # "count", "variables", "variable-count", "dtype", "none", "raised"
    message: str
    input_index: int | None = None


@dataclass
class Site:
    """One function decorated with tf.custom_gradient."""

    name: str
    forward: Callable[..., Any]
    definition: str | None
    grad_fn_location: str | None = None
    grad_fn_accepts_variables: bool = False
    # Concrete arguments of the first eager calls: what the per-site value check replays.
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    reads_variables: list[str] = field(default_factory=list)
    parameter_names: list[str] = field(default_factory=list)
    # The function as TensorFlow decorated it: what the per-site check differentiates.
    decorated: Callable[..., Any] | None = None
    # Where tf.Variables are created on each call: in the forward, or inside grad_fn.
    forward_variables: list[str | None] = field(default_factory=list)
    grad_fn_variables: list[str | None] = field(default_factory=list)

    def add_violation(self, violation: Violation) -> None:
        if all(v.message != violation.message for v in self.violations):
            self.violations.append(violation)


@dataclass
class Observer:
    sites: list[Site] = field(default_factory=list)

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


def violations_since(mark: Checkpoint, kind: str) -> list[Violation]:
    return [violation for site in (_active[-1].sites if _active else [])
            for violation in site.violations[mark.sizes.get(id(site), (0, 0))[1]:]
            if violation.kind == kind]


@contextlib.contextmanager
def _noting_variables(found: list[str | None], code: Any) -> Iterator[None]:
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


# The observer in force: nested observation (a `gradcheck run` over many checks sharing
# modules loaded once) reuses it, so that decorators applied at the first import still report.
_active: list[Observer] = []


def _source_location(function: Callable[..., Any]) -> str | None:
    code = getattr(inspect.unwrap(function), "__code__", None)
    if code is None:
        return None
    try:
        lines, start = inspect.getsourcelines(code)
    except (OSError, TypeError):
        return format_location(code.co_filename, code.co_firstlineno)
    for offset, line in enumerate(lines):
        if line.lstrip().startswith(("def ", "async def ")):
            return format_location(code.co_filename, start + offset)
    return format_location(code.co_filename, code.co_firstlineno)


def return_location(function: Callable[..., Any]) -> str | None:
    """The grad_fn's own `return` line when it has exactly one, else its `def` line."""
    code = getattr(function, "__code__", None)
    if code is None:
        return None
    try:
        lines, start = inspect.getsourcelines(code)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return _source_location(function)
    definition = tree.body[0] if tree.body else None
    returns = []
    if isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
        nested = {id(n) for node in ast.walk(definition) if node is not definition
                  and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                  for n in ast.walk(node)}
        returns = [n for n in ast.walk(definition)
                   if isinstance(n, ast.Return) and id(n) not in nested]
    if len(returns) == 1:
        return format_location(code.co_filename, start + returns[0].lineno - 1)
    return _source_location(function)


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


def _repair(site: Site, args: tuple[Any, ...], grads: Any, eager: bool) -> list[Any]:
    """Check count and dtype of the input gradients; return a list TensorFlow will accept."""
    tf = tensorflow()
    flat_args = tf.nest.flatten(args)
    flat = list(grads) if isinstance(grads, (list, tuple)) else [grads]
    if len(flat) != len(flat_args) and eager:
        site.add_violation(Violation(
            "count",
            f"grad_fn of {site.name} returned {len(flat)} gradient(s) for {len(flat_args)}"
            f" input(s); it must return exactly one per input, in order",
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
                    "dtype",
                    f"grad_fn of {site.name} returned a {grad_dtype.name} gradient for input"
                    f" {name} of dtype {arg_dtype.name}; each gradient must have its input's"
                    f" dtype (tf.cast it)", index,
                ))
            grad = tf.cast(grad, arg_dtype)
        repaired.append(grad)
    return repaired


def _observed_grad_fn(site: Site, args: tuple[Any, ...],
                      grad_fn: Callable[..., Any]) -> Callable[..., Any]:
    site.grad_fn_location = site.grad_fn_location or return_location(grad_fn)
    site.grad_fn_accepts_variables = accepts_variables(grad_fn)

    def grad_wrapper(*upstreams: Any, variables: Any = None) -> Any:
        with _noting_variables(site.grad_fn_variables, getattr(grad_fn, "__code__", None)):
            return _checked_grad_fn(*upstreams, variables=variables)

    def _checked_grad_fn(*upstreams: Any, variables: Any = None) -> Any:
        eager = _is_eager(upstreams)
        if not variables:
            return _repair(site, args, grad_fn(*upstreams), eager)
        names = [v.name for v in variables]
        site.reads_variables = names
        if not site.grad_fn_accepts_variables:
            if eager:
                site.add_violation(Violation(
                    "variables",
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
                    "variable-count",
                    f"grad_fn of {site.name} takes variables= but did not return the pair"
                    " (input_grads, variable_grads)",
                ))
            return _repair(site, args, returned, eager), [None] * len(variables)
        input_grads, variable_grads = returned
        variable_grads = list(variable_grads) if isinstance(variable_grads, (list, tuple)) \
            else [variable_grads]
        if len(variable_grads) != len(variables) and eager:
            site.add_violation(Violation(
                "variable-count",
                f"grad_fn of {site.name} returned {len(variable_grads)} variable gradient(s)"
                f" for {len(variables)} variable(s) ({', '.join(names)}); return one per"
                " variable, in the order of `variables`",
            ))
        variable_grads = (variable_grads + [None] * len(variables))[: len(variables)]
        return _repair(site, args, input_grads, eager), variable_grads

    return grad_wrapper


def make_decorator(observer: Observer, original: Callable[..., Any]) -> Callable[..., Any]:
    """A stand-in for tf.custom_gradient that records every decorated function."""

    def custom_gradient(f: Callable[..., Any] | None = None) -> Any:
        if f is None:
            return custom_gradient
        name, definition = getattr(f, "__name__", "custom_gradient"), _source_location(f)
        # Decorated again on every call (a custom_gradient defined inside a grad_fn): one site.
        site = next((s for s in observer.sites if definition is not None
                     and (s.name, s.definition) == (name, definition)), None)
        if site is None:
            site = Site(name, f, definition, parameter_names=_parameter_names(f))
            observer.sites.append(site)
        site.forward = f

        @functools.wraps(f)
        def forward(*args: Any, **kwargs: Any) -> Any:
            with _noting_variables(site.forward_variables, getattr(f, "__code__", None)):
                result, grad_fn = f(*args, **kwargs)
            if len(site.calls) < MAX_CALLS_KEPT and _is_eager((args, kwargs)):
                site.calls.append((_snapshot(args), _snapshot(kwargs)))
            return result, _observed_grad_fn(site, args, grad_fn)

        site.decorated = original(forward)
        return site.decorated

    return custom_gradient


@contextlib.contextmanager
def observing_custom_gradients(enabled: bool = True) -> Iterator[Observer]:
    """Replace tf.custom_gradient while the user's code is imported and checked."""
    if not enabled:
        yield Observer()
        return
    if _active:
        _active[-1].start_check()
        yield _active[-1]
        return
    observer = Observer()
    tf = tensorflow()
    original = tf.custom_gradient
    tf.custom_gradient = make_decorator(observer, original)
    _active.append(observer)
    try:
        yield observer
    finally:
        _active.pop()
        tf.custom_gradient = original

