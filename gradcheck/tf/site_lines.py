"""Where things are in the user's source: a function's `def` line, a grad_fn's `return` line,
the line that called into TensorFlow, and whether a file is TensorFlow's (or gradcheck's) own."""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
import traceback
from collections.abc import Callable
from typing import Any

from gradcheck.evidence import Location
from gradcheck.load.locations import format_location

# Importable from here too, for the modules that still do (tf/values.py, tf/traces.py).
from gradcheck.user_code import installed_package as installed_package
from gradcheck.user_code import is_installed as is_installed
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
