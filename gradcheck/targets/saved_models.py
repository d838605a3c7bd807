"""Saved models as functions to check: a SavedModel's `__call__`, attribute or signature, or a
.keras model loaded in safe mode; with the functions TensorFlow imported without their custom
gradients, and the call under a tape that fails for want of a gradient."""

from __future__ import annotations

import contextlib
import inspect
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from gradcheck.engine.runtime import tensorflow
from gradcheck.errors import LoadError
from gradcheck.targets.saved_files import SavedTarget

# TensorFlow's warning when a SavedModel's function had custom gradients it could not save.
_UNSAVED = re.compile(r"Importing a function \((\S+)\) with ops with (?:unsaved )?custom gradients")


@dataclass(frozen=True)
class LoadedModel:
    """The callable a saved TARGET names, the functions imported without their custom
    gradients, and the shapes its input signature declares (name, shape; None: any size)."""

    function: Callable[..., Any]
    unsaved_gradients: tuple[str, ...] = ()
    input_shapes: tuple[tuple[str, tuple[int | None, ...]], ...] = ()


class _Unsaved(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.functions: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = _UNSAVED.search(record.getMessage())
        if found and found.group(1) not in self.functions:
            self.functions.append(found.group(1))


@contextlib.contextmanager
def _unsaved_gradients() -> Iterator[_Unsaved]:
    handler = _Unsaved()
    loggers = [logging.getLogger(name) for name in ("absl", "tensorflow")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _typed(function: Callable[..., Any], specs: Sequence[tuple[str, Any]],
           keywords: bool, name: str) -> Callable[..., Any]:
    """FUNCTION called with its arguments cast to the dtypes its signature declares (-i gives
    float64), with parameters named after the signature's inputs."""
    tf = tensorflow()

    def call(*args: Any, **kwargs: Any) -> Any:
        bound = dict(zip((name for name, _ in specs), args)) | kwargs
        cast = {name: tf.cast(bound[name], spec.dtype)
                if spec.dtype.is_floating and name in bound else bound.get(name)
                for name, spec in specs}
        return function(**cast) if keywords else function(*cast.values())

    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name, _ in specs])
    call.__name__ = call.__qualname__ = name
    return call


def _signature(loaded: Any, name: str) -> LoadedModel:
    function = loaded.signatures[name]
    specs = sorted(function.structured_input_signature[1].items())
    return LoadedModel(_typed(function, specs, keywords=True, name=name), (),
                       tuple((key, tuple(spec.shape)) for key, spec in specs))


def _restored(function: Any, name: str) -> LoadedModel:
    specs = getattr(function, "input_signature", None)
    if not specs or not all(hasattr(spec, "dtype") for spec in specs):
        return LoadedModel(function)
    concrete = getattr(function, "concrete_functions", None) or [None]
    traced = getattr(concrete[0], "structured_input_signature", ((),))[0]
    named = [(getattr(traced[i], "name", None) if i < len(traced) else None) or spec.name
             or f"x{i}" for i, spec in enumerate(specs)]
    return LoadedModel(_typed(function, list(zip(named, specs)), keywords=False, name=name), (),
                       tuple((key, tuple(spec.shape)) for key, spec in zip(named, specs)))


def _callable_of(loaded: Any, target: SavedTarget) -> LoadedModel:
    signatures = dict(getattr(loaded, "signatures", {}))
    attribute = target.attribute
    if attribute is None:
        if callable(loaded):
            return _restored(loaded.__call__, "__call__")
        if "serving_default" in signatures:
            return _signature(loaded, "serving_default")
    elif attribute in signatures:
        return _signature(loaded, attribute)
    elif callable(getattr(loaded, attribute, None)):
        return _restored(getattr(loaded, attribute), attribute)
    names = sorted({n for n in dir(loaded) if not n.startswith("_")
                    and callable(getattr(loaded, n, None))} | set(signatures))
    wanted = f"no attribute or signature {attribute!r}" if attribute else (
        "no __call__ and no serving_default signature")
    raise LoadError(f"SavedModel {target.path!r} has {wanted}; name one as"
                    f" {target.path}:NAME ({', '.join(names) or 'it has none'})")


def load_saved(target: SavedTarget) -> LoadedModel:
    """Load TARGET's model (a .keras file in safe mode, not compiled: no code from the file
    runs, and its compiled loss, which the check does not use, need not be importable)."""
    tf = tensorflow()
    try:
        if target.keras:
            import keras

            # Not compiled: a gradient check needs no loss, and a custom one would not load.
            return LoadedModel(keras.saving.load_model(target.path, safe_mode=True,
                                                       compile=False))
        with _unsaved_gradients() as unsaved:
            loaded = tf.saved_model.load(target.path)
    except Exception as exc:  # noqa: BLE001 - any failure to read the file is the user's
        raise LoadError(f"cannot load {target.path!r}: {_first_line(exc)}") from None
    found = _callable_of(loaded, target)
    # The restored functions hold only weak references to the variables of the loaded object.
    found.function.__dict__.setdefault("saved_model", loaded)
    return LoadedModel(found.function, tuple(unsaved.functions), found.input_shapes)
