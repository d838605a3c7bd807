"""Load the user's function from `module:attr` or `path/to/file.py:attr` (no TensorFlow here)."""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.util
import inspect
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from gradcheck.errors import LoadError
from gradcheck.load.locations import relative_path
from gradcheck.load.paths import not_a_regular_file

FORMAT_HINT = "'module:function' or 'path/to/file.py:function'"
# Set by module_cache(): each .py file (or dotted module) is executed once per `gradcheck run`.
_FILE_MODULES: ContextVar[dict[Path | str, ModuleType | LoadError] | None] = ContextVar(
    "gradcheck_file_modules", default=None)


@contextlib.contextmanager
def module_cache() -> Iterator[None]:
    """Within this block a .py TARGET file is imported once, however many checks name it."""
    token = _FILE_MODULES.set({})
    try:
        yield
    finally:
        _FILE_MODULES.reset(token)


@dataclass(frozen=True)
class Target:
    spec: str
    function: Callable[..., Any]
    module: ModuleType | None
    name: str
    # A saved model's input signature: the shapes of random arguments when none are given
    # (a dict or list of shapes for a structured argument).
    declared_shapes: tuple[Any, ...] = ()

    @property
    def qualname(self) -> str:
        return self.spec.rpartition(":")[2]


def split_spec(spec: str) -> tuple[str, str]:
    """Split TARGET into its module part and attribute path, validating the format."""
    module_part, sep, attr_part = spec.strip().rpartition(":")
    if not spec.strip():
        raise LoadError(f"TARGET is empty; expected {FORMAT_HINT}")
    if not sep or not module_part or not attr_part:
        raise LoadError(f"TARGET {spec!r} must be {FORMAT_HINT}")
    if not all(part.isidentifier() for part in attr_part.split(".")):
        raise LoadError(f"TARGET {spec!r}: {attr_part!r} is not a valid attribute path")
    return module_part, attr_part


def _add_to_sys_path(directory: str) -> None:
    # Never removed: the user's module may import its siblings lazily, when f runs.
    if directory not in sys.path:
        sys.path.insert(0, directory)


def _is_file_spec(module_part: str) -> bool:
    return module_part.endswith(".py") or os.sep in module_part or "/" in module_part


def _innermost_user_frame(exc: BaseException) -> str | None:
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if "importlib" not in f.filename and "gradcheck" not in f.filename]
    frame = user[-1] if user else None
    return f"{relative_path(frame.filename)}:{frame.lineno}" if frame else None


def _import_failure(module_name: str, exc: BaseException,
                    file_part: str | None = None) -> LoadError:
    tb = "".join(traceback.format_exception(exc))
    source = exc.filename if isinstance(exc, SyntaxError) and exc.filename else file_part
    if isinstance(exc, (SyntaxError, ValueError)) and "null bytes" in str(exc) and source:
        return LoadError(f"cannot import {relative_path(source)}: it contains NUL bytes, so it"
                         " is not Python source (a binary file, or saved as UTF-16?)",
                         user_traceback=tb)
    if isinstance(exc, SyntaxError):
        source_name = relative_path(source or "?")
        line = f"{source_name}:{exc.lineno}" if exc.lineno else source_name
        return LoadError(f"syntax error in {line}: {exc.msg}", user_traceback=tb)
    frame = _innermost_user_frame(exc)
    suffix = f" (at {frame})" if frame else ""
    if isinstance(exc, ModuleNotFoundError):
        return LoadError(
            f"importing module {module_name!r} failed: {exc}{suffix}", user_traceback=tb
        )
    return LoadError(
        f"importing module {module_name!r} raised {type(exc).__name__}: {exc}{suffix}",
        user_traceback=tb,
    )


def _import_file(file_part: str) -> ModuleType:
    cache = _FILE_MODULES.get()
    key = Path(file_part).resolve()
    if cache is not None and key in cache:
        cached = cache[key]
        if isinstance(cached, LoadError):
            raise LoadError(cached.message, user_traceback=cached.user_traceback)
        return cached
    imported = sys.modules.get(key.stem)
    if cache is not None and imported is not None and key.stem in cache and getattr(
            imported, "__file__", None) and Path(str(imported.__file__)).resolve() == key:
        cache[key] = imported  # imported by dotted name earlier in this run
        return imported
    try:
        module = _exec_file(file_part)
    except LoadError as exc:
        if cache is not None:
            cache[key] = exc
        raise
    if cache is not None:
        cache[key] = module
    return module


def _exec_file(file_part: str) -> ModuleType:
    path = Path(file_part)
    why = not_a_regular_file(path)
    if why is not None:
        raise LoadError(f"file {file_part!r} {why}")
    if path.suffix != ".py":
        raise LoadError(f"file {file_part!r} is not a Python file (.py)")
    module_name = path.stem
    if not module_name.isidentifier():
        raise LoadError(f"file {file_part!r}: {module_name!r} is not a valid module name")
    spec = importlib.util.spec_from_file_location(module_name, path.resolve())
    if spec is None or spec.loader is None:
        raise LoadError(f"file {file_part!r} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(module_name)
    sys.modules[module_name] = module
    try:
        _add_to_sys_path(str(path.resolve().parent))
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - any failure of the user's module
        if previous is not None:
            sys.modules[module_name] = previous
        else:
            sys.modules.pop(module_name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise _import_failure(module_name, exc, file_part) from exc
    if previous is not None and module_name in getattr(sys, "stdlib_module_names", ()):
        sys.modules[module_name] = previous  # a json.py of the user's must not replace json
    return module


def _import_module(module_name: str, search_path: str) -> ModuleType:
    if not all(part.isidentifier() for part in module_name.split(".")):
        raise LoadError(f"TARGET module {module_name!r} is not a valid module name")
    cache = _FILE_MODULES.get()
    try:
        module = importlib.import_module(module_name)
        if cache is not None:
            cache[module_name] = module
        return module
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module_name == missing or module_name.startswith(missing + "."):
            raise LoadError(
                f"could not import module {module_name!r}: no module named {missing!r}"
                f" (searched --path {search_path!r} and sys.path)"
            ) from exc
        raise _import_failure(module_name, exc) from exc
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001
        raise _import_failure(module_name, exc) from exc


def import_module(module_part: str, search_path: str = ".") -> ModuleType:
    """Import the module part of a TARGET (a dotted name or a .py file); a module imported
    before is used as it is (custom gradients are observed when called, not when defined)."""
    _add_to_sys_path(os.path.abspath(search_path))
    if _is_file_spec(module_part):
        return _import_file(module_part)
    return _import_module(module_part, search_path)


def resolve_attribute(module: ModuleType, module_part: str, attr_path: str) -> Any:
    obj: Any = module
    owner: Any = None
    walked: list[str] = []
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            where = f"module {module_part!r}" if not walked else repr(".".join(walked))
            names = [n for n in dir(obj) if not n.startswith("_")
                     and not inspect.ismodule(getattr(obj, n, None))]
            close = difflib.get_close_matches(part, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise LoadError(f"attribute {part!r} not found in {where}{hint}")
        owner, obj = obj, getattr(obj, part)
        walked.append(part)
    if inspect.isclass(owner) and inspect.isfunction(obj):
        static = inspect.getattr_static(owner, walked[-1])
        if not isinstance(static, staticmethod):
            obj = _bind_to_instance(owner, walked[-1], module_part)
    return obj


def _bind_to_instance(cls: type, method: str, module_part: str) -> Any:
    try:
        instance = cls()
    except Exception as exc:
        raise LoadError(
            f"{cls.__name__}.{method} is an instance method and {cls.__name__}() failed: {exc};"
            f" point TARGET at a function or a staticmethod"
        ) from exc
    return getattr(instance, method)


def load_target(
    spec: str,
    search_path: str = ".",
    import_context: Callable[[], AbstractContextManager[Any]] | None = None,
) -> Target:
    """Import TARGET and return the callable it names, with loader errors in plain words."""
    module_part, attr_path = split_spec(spec)
    if not os.path.isdir(search_path):
        raise LoadError(f"--path {search_path!r} is not a directory")
    context = import_context() if import_context is not None else contextlib.nullcontext()
    with context:
        module = import_module(module_part, search_path)
    function = resolve_attribute(module, module_part, attr_path)
    if inspect.isclass(function):
        raise LoadError(
            f"{spec!r} is a class, not a function; name a function or a method"
            f" ({module_part}:{attr_path}.method)"
        )
    if not callable(function):
        raise LoadError(f"{spec!r} is not callable (it is a {type(function).__name__})")
    return Target(spec=spec, function=function, module=module, name=attr_path.split(".")[-1])


def load_attribute(spec: str, search_path: str = ".") -> Any:
    """Any attribute named by `module:attr` (e.g. an --inputs provider), callable or not."""
    module_part, attr_path = split_spec(spec)
    return resolve_attribute(import_module(module_part, search_path), module_part, attr_path)


_GRAPH_MODE_CALLS = ("disable_eager_execution(", "disable_v2_behavior(")


def graph_mode_error(function: Callable[..., Any]) -> str:
    """Why f cannot be checked when eager execution was disabled, at the line that did it if
    f's module has one."""
    where = "the process"
    module = inspect.getmodule(function)
    path = getattr(module, "__file__", None)
    if path and os.path.isfile(path):
        with open(path, encoding="utf-8", errors="replace") as source:
            for number, line in enumerate(source, start=1):
                if any(call in line for call in _GRAPH_MODE_CALLS) and not \
                        line.lstrip().startswith("#"):
                    where = f"{relative_path(path)}:{number}"
                    break
    return (f"eager execution is disabled ({where} calls"
            " tf.compat.v1.disable_eager_execution() or disable_v2_behavior()): gradcheck checks"
            " TensorFlow 2 code, which runs eagerly; remove that call (graph-mode code can be"
            " wrapped in tf.function instead)")
