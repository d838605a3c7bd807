"""Where things are in the user's source: a function's `def` line, a grad_fn's `return` line,
the line that called into TensorFlow, and whether a file is TensorFlow's (or gradcheck's) own."""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import re
import sys
import textwrap
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from gradcheck.evidence import Location
from gradcheck.load.locations import format_location, is_user_file, notebook_cell
from gradcheck.user_code import is_library


def source_location(function: Callable[..., Any]) -> Location | None:
    code = getattr(inspect.unwrap(function), "__code__", None)
    if code is None:
        return None
    lines, start = _code_lines(code)
    if not lines:
        return format_location(code.co_filename, code.co_firstlineno)
    for offset, line in enumerate(lines):
        if line.lstrip().startswith(("def ", "async def ")):
            return format_location(code.co_filename, start + offset)
    return format_location(code.co_filename, code.co_firstlineno)


def return_location(function: Callable[..., Any]) -> Location | None:
    """The grad_fn's own `return` line when it has exactly one, else its `def` line."""
    code = getattr(function, "__code__", None)
    if code is None:
        return None
    lines, start = _code_lines(code)
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return source_location(function)
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
    return source_location(function)


def _code_lines(code: Any) -> tuple[list[str], int]:
    """The source lines of a code object's block and its first line number (decorators
    included), as inspect.getsourcelines gives them, without its search of every loaded
    module for the file's module (a third of a second the first time TensorFlow is loaded)."""
    start = code.co_firstlineno
    lines = linecache.getlines(code.co_filename)
    if not 0 < start <= len(lines):
        return [], start
    try:
        return inspect.getblock(lines[start - 1:]), start
    except (IndentationError, SyntaxError):
        return lines[start - 1:start], start


def caller_location() -> Location | None:
    """The innermost line of the stack outside TensorFlow and gradcheck: the call's line."""
    for frame in reversed(traceback.extract_stack()):
        if not is_library(frame.filename) and not frame.filename.startswith("<"):
            return format_location(frame.filename, frame.lineno or 0)
    return None


# A tf-keras functional model holds a TensorFlow call on a Keras tensor as a TFOpLambda layer
# named after the call (tf.math.acos, tf.math.acos_1): its ops run inside Keras' code.
_OP_LAYER = re.compile(r"tf\.((?:\w+\.)*)(\w+?)(?:_\d+)?")


def op_layer_line(op_name: str) -> Location | None:
    """Where the user wrote the TensorFlow call behind a TFOpLambda layer on `op_name`'s scope
    (model/tf.math.acos/Acos): the one call of that function in the user's loaded source (the
    one in a function that builds a functional model, if several), else None."""
    for part in op_name.split("/")[:-1]:
        found = _OP_LAYER.fullmatch(part)
        if found and not found.group(1).startswith("__"):  # tf.__operators__: a + b
            calls = _calls_of(found.group(2))
            building = [location for location, builds in calls if builds]
            candidates = building or [location for location, _ in calls]
            return candidates[0] if len(candidates) == 1 else None
    return None


def running_layer_line(layers: Sequence[Any]) -> Location | None:
    """The user's line that built the innermost of `layers` (running, outermost first) that
    the user's code constructs by its class name: in the one loaded file that constructs as
    many of that class as the outermost model holds, the call in the same order as the layer
    among them (None when no file, or several, fit)."""
    outer = layers[0] if layers else None
    for layer in reversed(layers[1:]):
        name = type(layer).__name__
        same = [other for other in getattr(outer, "_flatten_layers", lambda: [])()
                if type(other) is type(layer)]
        by_file: dict[str, list[Location]] = {}
        for filename in _user_sources(len(sys.modules), len(linecache.cache)):
            for line, dotted, _ in _calls_in(filename):
                if dotted.split(".")[-1] == name:
                    by_file.setdefault(filename, []).append(format_location(filename, line))
        if not by_file:
            continue
        fitting = [sorted(calls, key=_order) for calls in by_file.values()
                   if len(calls) == len(same)]
        index = next((k for k, other in enumerate(same) if other is layer), None)
        if len(fitting) == 1 and index is not None:
            return fitting[0][index]
        return None
    return None


def _order(location: Location) -> tuple[str, int]:
    return location.path, location.line or 0


def _snake_case(name: str) -> str:
    """A Keras layer class's default name (UpSampling2D: up_sampling2d), as Keras makes it."""
    return re.sub("([a-z])([A-Z])", r"\1_\2",
                  re.sub("(.)([A-Z][a-z0-9]+)", r"\1_\2", name)).lower()


def layer_line(op_name: str) -> Location | None:
    """Where the user constructed the Keras layer whose default name is a scope of `op_name`
    (functional_1/up_sampling2d_1/resize/ResizeBilinear: an UpSampling2D(...) call), when the
    user's loaded source has exactly one such call (else None: which one is not known)."""
    for part in reversed(op_name.split("/")[:-1]):
        base = re.sub(r"_\d+$", "", part)
        if not base or base.startswith("gradient"):
            continue
        calls = {location for filename in _user_sources(len(sys.modules), len(linecache.cache))
                 for line, dotted, _ in _calls_in(filename)
                 if _snake_case(dotted.split(".")[-1]) == base and dotted.split(".")[-1] != base
                 for location in [format_location(filename, line)]}
        if calls:
            return calls.pop() if len(calls) == 1 else None
    return None


def _calls_of(name: str) -> list[tuple[Location, bool]]:
    """The lines of the user's loaded modules (and notebook cells) that call a function of
    TensorFlow's named `name` (tf.math.acos(...), tf.acos(...)), and whether the function
    around each builds a functional model (calls Input or Model)."""
    return [(format_location(filename, line), builds)
            for filename in _user_sources(len(sys.modules), len(linecache.cache))
            for line, dotted, builds in _calls_in(filename)
            if dotted.split(".")[-1] == name and dotted.startswith("tf.")]


@functools.lru_cache(maxsize=4)
def _user_sources(modules: int, cached_lines: int) -> tuple[str, ...]:
    """The user's loaded source files (the arguments: what a change of them would show)."""
    files = {getattr(module, "__file__", None) for module in list(sys.modules.values())}
    files |= {name for name in list(linecache.cache) if notebook_cell(name) is not None}
    return tuple(sorted(f for f in files if f and f.endswith(".py") and not is_library(f)
                        and is_user_file(f)))


_MODEL_BUILDERS = frozenset({"Input", "Model"})


def _called(node: ast.AST) -> str:
    return ast.unparse(node.func) if isinstance(node, ast.Call) else ""


@functools.lru_cache(maxsize=256)
def _calls_in_source(source: str) -> tuple[tuple[int, str, bool], ...]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    found = {}
    scopes = [tree, *(node for node in ast.walk(tree)
                      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    for scope in scopes:  # outermost first: an inner function's calls are its own
        calls = [node for node in ast.walk(scope) if isinstance(node, ast.Call)
                 and isinstance(node.func, ast.Attribute)]
        builds = any(_called(node).split(".")[-1] in _MODEL_BUILDERS
                     for node in ast.walk(scope))
        found.update({node.lineno: (node.lineno, _called(node), builds) for node in calls})
    return tuple(found.values())


def _calls_in(filename: str) -> tuple[tuple[int, str, bool], ...]:
    return _calls_in_source("".join(linecache.getlines(filename)))
