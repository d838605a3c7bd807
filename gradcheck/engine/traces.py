"""Traces reused across checks: what a trace of f depends on (its code, closure, the globals it
reads, its variables, the arguments' shapes, dtypes and non-tensor values) as a key, and a
bounded cache of what was traced (and compiled) under it."""

from __future__ import annotations

import functools
import hashlib
import sys
import threading
import types
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

import numpy as np

from gradcheck.engine import instrument
from gradcheck.engine.program import Program, Slot, kept_with
from gradcheck.engine.runtime import tensorflow
from gradcheck.user_code import is_installed, is_library

T = TypeVar("T")
# Entries kept: each holds a traced function and its XLA executables (and the variables and
# constants they captured), so a long test run must not keep them all.
CACHE_SIZE = 64
# Objects looked at for one key, and how deep: beyond either, f is not cached at all.
BUDGET = 20_000
MAX_DEPTH = 8
_SCALARS = (type(None), bool, int, str, bytes, type(Ellipsis))


class Unkeyable(Exception):
    """Something f's trace depends on cannot be told apart safely from another value."""


class _Same:
    """Equal only to a wrapper of the very same object, held weakly where possible."""

    __slots__ = ("_ref", "_id")

    def __init__(self, obj: Any) -> None:
        self._id = id(obj)
        try:
            self._ref: Callable[[], Any] = weakref.ref(obj)
        except TypeError:
            self._ref = lambda: obj

    @property
    def alive(self) -> bool:
        return self._ref() is not None

    def __hash__(self) -> int:
        return self._id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and self._id == other._id and self.alive \
            and self._ref() is other._ref()


@functools.lru_cache(maxsize=4096)
def _is_library_file(filename: str) -> bool:
    return is_library(filename) or is_installed(filename) or filename.startswith("<frozen")


def _library_type(kind: type) -> bool:
    module = getattr(kind, "__module__", "") or ""
    if module == "builtins":
        return True
    file = getattr(sys.modules.get(module), "__file__", None)
    return file is None or _is_library_file(file)


@functools.cache
def _custom_gradient_type() -> Any:
    import importlib

    return importlib.import_module("tensorflow.python.ops.custom_gradient").Bind


def _code_names(code: types.CodeType) -> frozenset[str]:
    """Every global or attribute name the code (and the code nested in it) reads."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _code_names(constant)
    return frozenset(names)


class _Fingerprint:
    """One key: each value by its content, or by identity where identity is what matters
    (a tf.Variable, captured by reference; an immutable tensor; a library's function)."""

    def __init__(self) -> None:
        self.budget = BUDGET
        self.identities: list[_Same] = []
        self._active: set[int] = set()

    def same(self, obj: Any) -> _Same:
        wrapped = _Same(obj)
        self.identities.append(wrapped)
        return wrapped

    def value(self, obj: Any, depth: int = 0) -> Hashable:
        self.budget -= 1
        if self.budget < 0 or depth > MAX_DEPTH:
            raise Unkeyable("too much to look at")
        if isinstance(obj, (float, complex)):
            return (type(obj), repr(obj))  # -0.0 is not 0.0 to a trace
        if isinstance(obj, _SCALARS):
            return (type(obj), obj)
        if id(obj) in self._active:
            return self.same(obj)  # a cycle: f calling itself, a list holding itself
        self._active.add(id(obj))
        try:
            return self._compound(obj, depth + 1)
        finally:
            self._active.discard(id(obj))

    def _compound(self, obj: Any, depth: int) -> Hashable:
        tf = tensorflow()
        if isinstance(obj, (np.ndarray, np.generic)):
            return self._array(np.asarray(obj))
        if isinstance(obj, (tf.Variable, tf.Tensor)):
            if isinstance(obj, tf.Tensor) and not hasattr(obj, "numpy"):
                raise Unkeyable("a symbolic tensor")
            return self.same(obj)  # variables by reference; eager tensors never change
        if isinstance(obj, (tf.dtypes.DType, tf.TensorShape, np.dtype, Enum)):
            return (type(obj), obj)
        if isinstance(obj, (tuple, list)):
            return (type(obj), tuple(self.value(item, depth) for item in obj))
        if isinstance(obj, dict):
            return (type(obj), tuple((self.value(k, depth), self.value(v, depth))
                                     for k, v in obj.items()))
        if isinstance(obj, (set, frozenset)):
            return (type(obj), frozenset(self.value(item, depth) for item in obj))
        if isinstance(obj, types.FunctionType):
            return self.function(obj, depth)
        if isinstance(obj, types.MethodType):
            return ("method", self.value(obj.__func__, depth), self.value(obj.__self__, depth))
        if isinstance(obj, functools.partial):
            return ("partial", self.value(obj.func, depth), self.value(obj.args, depth),
                    self.value(obj.keywords, depth))
        if isinstance(obj, (types.ModuleType, types.BuiltinFunctionType, np.ufunc)):
            return self.same(obj)
        if isinstance(obj, (staticmethod, classmethod)):
            return (type(obj), self.value(obj.__func__, depth))
        if isinstance(obj, property):
            return (property, self.value((obj.fget, obj.fset, obj.fdel), depth))
        if isinstance(obj, type):
            return self._class(obj, depth)
        python_function = getattr(obj, "python_function", None)  # a tf.function
        if isinstance(obj, tf.types.experimental.PolymorphicFunction) and python_function:
            return ("tf.function", self.same(obj), self.value(python_function, depth))
        if isinstance(obj, _custom_gradient_type()):  # what tf.custom_gradient returns
            bound = vars(obj)
            return ("custom_gradient", self.value(bound["_f"], depth),
                    self.value(bound["_d"], depth))
        return self._instance(obj, depth)

    def _array(self, array: np.ndarray) -> Hashable:
        if array.dtype.hasobject:
            raise Unkeyable("an array of Python objects")
        digest = hashlib.blake2b(array.tobytes(), digest_size=16)
        return ("array", array.shape, array.dtype.str, digest.digest())

    def _class(self, kind: type, depth: int) -> Hashable:
        if _library_type(kind):
            return self.same(kind)
        return ("class", self.same(kind), self._attributes(vars(kind), depth))

    def _instance(self, obj: Any, depth: int) -> Hashable:
        """A user-defined object by its type and attributes; a library's objects (a Keras
        layer, a distribution) have state this cannot see: not cached."""
        if _library_type(type(obj)) or not hasattr(obj, "__dict__"):
            raise Unkeyable(f"a {type(obj).__name__}")
        return ("object", self.value(type(obj), depth), self._attributes(vars(obj), depth))

    def _attributes(self, attributes: Any, depth: int) -> Hashable:
        return tuple((name, self.value(value, depth)) for name, value in attributes.items()
                     if not (name.startswith("__") and name.endswith("__")))

    def function(self, function: types.FunctionType, depth: int) -> Hashable:
        """A library's function by identity (and what it wraps); the user's by its code, its
        closure, defaults and the globals (and attributes of the user's modules) it reads."""
        code = function.__code__
        if _is_library_file(code.co_filename):
            wrapped = getattr(function, "__wrapped__", None)
            return ("library", self.same(function),
                    None if wrapped is None else self.value(wrapped, depth))
        names = _code_names(code)
        namespace = function.__globals__
        read = tuple((name, self.value(namespace[name], depth))
                     for name in sorted(names) if name in namespace)
        modules = tuple(self._module_reads(namespace[name], names, depth)
                        for name in sorted(names) if isinstance(namespace.get(name),
                                                                types.ModuleType))
        cells = tuple(("empty",) if _empty(cell) else self.value(cell.cell_contents, depth)
                      for cell in function.__closure__ or ())
        return ("function", self.same(code), cells, self.value(function.__defaults__, depth),
                self.value(function.__kwdefaults__, depth), read, modules,
                self._attributes(vars(function), depth))

    def _module_reads(self, module: types.ModuleType, names: frozenset[str],
                      depth: int) -> Hashable:
        """The attributes of a user's module that f may read (`config.SCALE`)."""
        file = getattr(module, "__file__", None)
        if file is None or _is_library_file(file):
            return None
        namespace = vars(module)
        return tuple((name, self.value(namespace[name], depth)) for name in sorted(names)
                     if name in namespace)

    def slot(self, slot: Slot) -> Hashable:
        """A slot's place, kind, dtype and shape; its value too, unless it is a tensor the
        traced function takes as an argument (a variable by reference)."""
        traced_argument = slot.differentiable and slot.argument and not slot.is_variable
        content = None if traced_argument else (
            self.same(slot.value) if slot.is_variable else self.value(slot.value))
        return (slot.name, slot.position, slot.keyword, slot.kind.value, slot.differentiable,
                slot.dtype, slot.shape, slot.is_variable, slot.complex_dtype, slot.own_dtype,
                content)


def _empty(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return True
    return False


@dataclass(frozen=True)
class Key:
    """What one trace depends on; `identities` are the objects it holds by reference."""

    value: Hashable
    identities: tuple[_Same, ...]

    @property
    def alive(self) -> bool:
        return all(same.alive for same in self.identities)

    def extended(self, *parts: Hashable) -> Key:
        """The same program, another traced function of it (a mode, outputs, dtypes)."""
        return Key((self.value, parts), self.identities)


def program_key(program: Program) -> Key | None:
    """The key of f bound to these slots, None when f depends on something that cannot be
    compared safely (a library's object, such as a Keras layer)."""
    fingerprint = _Fingerprint()
    try:
        value = (fingerprint.value(program.function),
                 tuple(fingerprint.slot(slot) for slot in program.slots),
                 instrument.observing())
    except (Unkeyable, RecursionError):
        return None
    return Key(value, tuple(fingerprint.identities))


class TraceCache:
    """Least recently used entries, each dropped too once an object its key holds by
    reference is gone."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self.traces = 0  # how many times a cached function's body was traced: for tests
        self._entries: OrderedDict[Hashable, tuple[Key, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Key, make: Callable[[], T]) -> T:
        with self._lock:
            found = self._entries.get(key.value)
            if found is not None and found[0].alive:
                self._entries.move_to_end(key.value)
                return found[1]
            if found is not None:  # its function is gone: let its graph go now
                del self._entries[key.value]
        made = make()
        self.put(key, made)
        return made

    def put(self, key: Key, value: Any) -> None:
        with self._lock:
            for stale in [k for k, (held, _) in self._entries.items() if not held.alive]:
                del self._entries[stale]
            self._entries[key.value] = (key, value)
            self._entries.move_to_end(key.value)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def peek(self, key: Key) -> Any:
        """What is kept under the key, or None."""
        with self._lock:
            found = self._entries.get(key.value)
            return None if found is None or not found[0].alive else found[1]

    def drop(self, key: Key) -> None:
        with self._lock:
            self._entries.pop(key.value, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def noted_trace(self) -> None:
        self.traces += 1


TRACES = TraceCache()
# What was found out by tracing f (plain values, no tensors), under the same keys.
FOUND = TraceCache(4 * CACHE_SIZE)


def remembered(program: Program, parts: Hashable, find: Callable[[], T]) -> T:
    """find() once for every program with the same key (once for this program when f has
    no key: a Keras model's); what it finds must depend on nothing but f's trace (never on
    the point)."""
    key = program_key(program)
    if key is not None:
        return FOUND.get(key.extended(parts), find)
    found = kept_with(program)
    if parts not in found:
        found[parts] = find()
    return found[parts]




class Traced:
    """A tf.function of f's program whose body gets the program of the current call (never
    kept between calls, so the cache holds no user function); a trace that created
    tf.Variables is not reused (their initial values would be stale)."""

    def __init__(self, body: Callable[..., Any], **options: Any) -> None:
        tf = tensorflow()
        self.created_variables = False
        self._program: Program | None = None
        self._lock = threading.Lock()

        def noting(next_creator: Callable[..., Any], **kwargs: Any) -> Any:
            self.created_variables = True
            return next_creator(**kwargs)

        def traced(*tensors: Any) -> Any:
            TRACES.noted_trace()
            with tf.variable_creator_scope(noting):
                return body(self._program, *tensors)

        self.function = tf.function(traced, **options)

    def __call__(self, program: Program, *tensors: Any) -> Any:
        with self._lock:
            self._program = program
            try:
                return self.function(*tensors)
            finally:
                self._program = None


def call_traced(program: Program, parts: Hashable, body: Callable[..., Any],
                tensors: list[Any], **options: Any) -> Any:
    """body(program, *tensors) inside tf.function(**options), traced once for every call
    whose program has the same key and the same `parts` (what else body depends on);
    raises what tracing, compiling or running raises (and nothing failed is kept)."""
    return _call_traced(program_key(program), program, parts, body, tensors, **options)


def _call_traced(key: Key | None, program: Program, parts: Hashable, body: Callable[..., Any],
                 tensors: list[Any], **options: Any) -> Any:
    if key is None:
        return Traced(body, **options)(program, *tensors)
    key = key.extended(parts)
    entry = TRACES.get(key, lambda: Traced(body, **options))
    try:
        result = entry(program, *tensors)
    except BaseException:
        TRACES.drop(key)
        raise
    if entry.created_variables:
        TRACES.drop(key)
    return result


def first_traced(program: Program, attempts: Sequence[tuple[Hashable, Callable[..., Any]]],
                 tensors: list[Any], **options: Any) -> Any:
    """call_traced with each (parts, body) in turn until one traces and runs, starting with
    the one that did for this key before; raises the last one's error."""
    key = program_key(program)
    which = None if key is None else key.extended("first traced", tuple(p for p, _ in attempts))
    start = 0 if which is None else FOUND.peek(which) or 0
    failure: BaseException | None = None
    for index in range(start, len(attempts)):
        parts, body = attempts[index]
        # f's key, taken afresh after a failed trace (tracing may have changed what f reads).
        key = key if index == start else program_key(program)
        try:
            result = _call_traced(key, program, parts, body, tensors, **options)
        except Exception as exc:
            failure = exc
            continue
        if which is not None and index:
            FOUND.put(which, index)
        return result
    assert failure is not None
    raise failure
