"""Keras targets: a layer or model instance, or a zero-argument factory that returns one
(built under a float64 dtype policy when it accepts one, so finite differences are precise)."""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from gradcheck.engine.program import FLOAT_DTYPES, Program, function_raised
from gradcheck.evidence.notes import CalledTraining, FactoryPolicy, Note


def is_layer(obj: Any) -> bool:
    """A Keras layer or model (Keras 3 or tf-keras): callable, with weights (which an unbuilt
    tf-keras model refuses to list until its first call)."""
    if not callable(obj) or inspect.isfunction(obj):
        return False
    try:
        return hasattr(obj, "trainable_weights") and hasattr(obj, "weights")
    except Exception:
        return True


def _running_layers(stack: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
    """Of `_stack_layers`, the Keras layers whose `call` is running."""
    return ((layer, frame) for layer, frame in stack if frame.f_code.co_name == "call")


def _name(layer: Any) -> str:
    return str(getattr(layer, "name", type(layer).__name__))


def program_layers(program: Program) -> list[Any]:
    """Every Keras layer f is or is given (a model TARGET, a model passed to a loss), once."""
    candidates = [getattr(program.function, "layer", program.function)]
    candidates += [slot.value for slot in program.slots if not slot.differentiable]
    found: list[Any] = []
    for candidate in candidates:
        flatten = getattr(candidate, "_flatten_layers", None)
        if callable(flatten):
            found += [layer for layer in flatten(include_self=True)
                      if all(layer is not known for known in found)]
    return found


@dataclass(frozen=True)
class LayerAtWork:
    """The user's Keras layer (`layer_class`, `layer`) running when a tf.Variable is made, the
    innermost line of its own code on the stack (`line`: its call, or a method it calls), and
    the layer class it is making anew (`made`) when the variable belongs to a layer created
    during this call (a layer constructed in call, not in __init__)."""

    layer_class: str
    layer: str
    line: tuple[str, int] | None = None
    made: str | None = None


def _stack_layers(frame: Any) -> Iterator[tuple[Any, Any]]:
    """(layer, frame) for every frame on the stack from `frame` outwards whose `self` is a
    Keras layer, innermost first."""
    while frame is not None:
        owner = frame.f_locals.get("self")
        if owner is not None and is_layer(owner):
            yield owner, frame
        frame = frame.f_back


def layer_at_work(known: Sequence[Any] = ()) -> LayerAtWork | None:
    """The user's Keras layer whose code is running (innermost first; with `known`, the
    layers f had before this call, the innermost of them), or None outside any."""
    from gradcheck.user_code import is_library

    stack = list(_stack_layers(sys._getframe(1)))
    running = [layer for layer, frame in _running_layers(stack)
               if not is_library(frame.f_code.co_filename)]
    if known:
        running = [layer for layer in running if any(layer is k for k in known)] or running
    if not running:
        return None
    culprit = running[0]
    own = next((frame for layer, frame in stack
                if layer is culprit and not is_library(frame.f_code.co_filename)), None)
    # Layers inside the culprit's code that f did not have before the call: made in it.
    cut = next((i for i, (layer, _) in enumerate(stack) if layer is culprit), len(stack))
    fresh = [layer for layer, _ in stack[:cut] if known and all(layer is not k for k in known)]
    made = type(fresh[-1]).__name__ if fresh else None
    line = None if own is None else (own.f_code.co_filename, own.f_lineno)
    return LayerAtWork(type(culprit).__name__, _name(culprit), line, made)


def running_layers() -> list[Any]:
    """The Keras layers whose `call` is running, outermost first."""
    return [layer for layer, _ in reversed(list(_running_layers(_stack_layers(sys._getframe(1)))))]


def layer_scope() -> str:
    """The Keras layers whose `call` is running, outermost first, as a name scope
    (functional/simple_rnn/simple_rnn_cell); "" outside any."""
    names: list[str] = []
    for layer, _ in _running_layers(_stack_layers(sys._getframe(1))):
        if not names or names[-1] != _name(layer):
            names.append(_name(layer))
    return "/".join(reversed(names))


def compute_dtype(layer: Any) -> str | None:
    """The dtype a Keras layer computes in (float16 under mixed_float16), or None."""
    policy = getattr(layer, "dtype_policy", None) or getattr(layer, "_dtype_policy", None)
    return getattr(policy, "compute_dtype", None)


def _float_spec(spec: Any) -> bool:
    """A tensor spec (or Keras input) of a floating dtype and a known rank."""
    dtype, shape = getattr(spec, "dtype", None), getattr(spec, "shape", None)
    return (str(getattr(dtype, "name", dtype)) in FLOAT_DTYPES and shape is not None
            and getattr(shape, "rank", 0) is not None)


def _spec_shapes(specs: Any) -> Any:
    """The shape of each float tensor spec in a model's input structure (a dict or list of
    them, or one), or None when any is of another dtype or an unknown rank."""
    if isinstance(specs, dict):
        shapes = {key: _spec_shapes(spec) for key, spec in specs.items()}
        return None if None in shapes.values() else shapes
    if isinstance(specs, (list, tuple)):
        listed = [_spec_shapes(spec) for spec in specs]
        return None if None in listed else listed
    return tuple(specs.shape) if _float_spec(specs) else None


def input_shapes(obj: Any) -> tuple[Any, ...]:
    """The shapes of random arguments when none are given: a built model's input (None for
    the batch; a dict or list of shapes for a model with several inputs, its one structured
    argument), or a tf.function's input signature's, one per argument; () when any input is
    not a float tensor."""
    if is_layer(obj):
        try:
            declared = _spec_shapes(getattr(obj, "input", None))
        except (AttributeError, ValueError):
            return ()
        return () if declared is None else (declared,)
    specs = getattr(obj, "input_signature", None) or ()
    shapes = [_spec_shapes(spec) for spec in specs]
    return () if None in shapes else tuple(shapes)


def _is_factory(obj: Any) -> bool:
    if not inspect.isfunction(obj):
        return False
    parameters = inspect.signature(obj).parameters.values()
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in parameters)


@contextlib.contextmanager
def _float64_policy() -> Iterator[None]:
    """Layers built inside use float64 variables and computations (each Keras loaded)."""
    restore: list[Callable[[], None]] = []
    keras3 = sys.modules.get("keras")
    if keras3 is not None and hasattr(keras3, "config"):
        previous, floatx = keras3.config.dtype_policy(), keras3.config.floatx()
        keras3.config.set_dtype_policy("float64")
        keras3.config.set_floatx("float64")  # Input layers too
        restore += [lambda: keras3.config.set_dtype_policy(previous),
                    lambda: keras3.config.set_floatx(floatx)]
    tf_keras = sys.modules.get("tf_keras")
    if tf_keras is not None:
        old, old_floatx = tf_keras.mixed_precision.global_policy(), tf_keras.backend.floatx()
        tf_keras.mixed_precision.set_global_policy("float64")
        tf_keras.backend.set_floatx("float64")
        restore += [lambda: tf_keras.mixed_precision.set_global_policy(old),
                    lambda: tf_keras.backend.set_floatx(old_floatx)]
    try:
        yield
    finally:
        for undo in restore:
            undo()


class TrainingCall:
    """A layer called with training=True (dropout, batch statistics on), named as the layer."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.name = layer.name
        self.weights = layer.weights
        self.trainable_weights = layer.trainable_weights

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.layer(*args, training=True, **kwargs)


def _build(factory: Callable[[], Any], float64: bool) -> tuple[Any, Exception | None]:
    """The factory's result, or what it raised."""
    try:
        with _float64_policy() if float64 else contextlib.nullcontext():
            return factory(), None
    except Exception as exc:
        return None, exc


def keras_target(obj: Any, training: bool = False, float64: bool = True
                 ) -> tuple[Any, list[Note]]:
    """What to check for a TARGET that may be a Keras layer or a factory of one, with notes
    (`float64`: try the float64 dtype policy first)."""
    notes: list[Note] = []
    if _is_factory(obj):
        built, failed = _build(obj, float64=float64)
        note = FactoryPolicy(obj.__name__, float64=float64)
        if failed is not None and float64:
            built, failed = _build(obj, float64=False)
            note = FactoryPolicy(obj.__name__, float64=False)
        if failed is not None and not inspect.signature(obj).parameters:
            # Only a factory takes no parameters at all (a function with defaults may be f).
            raise function_raised(obj, failed)
        if is_layer(built):
            obj = built
            notes.append(note)
    if is_layer(obj) and training:
        notes.append(CalledTraining(obj.name))
        return TrainingCall(obj), notes
    return obj, notes


RANDOM_LAYERS = ("Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D",
                 "GaussianNoise", "GaussianDropout", "AlphaDropout")


def random_layers(function: Any) -> list[str]:
    """The layers of a Keras target that draw random numbers when training (dropout...)."""
    layer = getattr(function, "layer", function)
    found = []
    for sub in getattr(layer, "layers", None) or [layer]:
        if type(sub).__name__ in RANDOM_LAYERS or type(sub).__name__.startswith("Random"):
            found.append(f"{sub.name} ({type(sub).__name__})")
    return found
