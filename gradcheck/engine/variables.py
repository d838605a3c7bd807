"""The trainable variables f reads, as sources next to its arguments: named by their path
(dense/kernel) or their Python name, selected by --wrt."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from gradcheck.engine.program import FLOAT_DTYPES, Program, Slot, SlotKind
from gradcheck.engine.runtime import tensorflow
from gradcheck.errors import InputError
from gradcheck.evidence.notes import LeftOut, NonTrainable, Note

WRT_GROUPS = ("all", "inputs", "variables")


def _keras_weights(function: Any) -> list[Any]:
    """A Keras layer's or model's weights (Keras 3 wraps each tf.Variable as .value)."""
    weights = getattr(function, "weights", None)
    return list(weights) if isinstance(weights, (list, tuple)) else []


def _tf_variable(weight: Any) -> Any:
    """The tf.Variable behind a weight (Keras 3 wraps it as .value; tf-keras weights are one)."""
    tf = tensorflow()
    inner = getattr(weight, "value", None)
    return inner if isinstance(inner, tf.Variable) else weight


def weight_path(weight: Any) -> str:
    """A weight's path (dense/kernel: Keras 3's path, else its name without ':0')."""
    return str(getattr(weight, "path", None) or weight.name).split(":")[0]


def weight_path_in(weight: Any, function: Any) -> str:
    """A weight's path inside the model (or layer) `function` that holds it: dense/kernel."""
    path = weight_path(weight)
    prefix = f"{getattr(function, 'name', '')}/"
    return path[len(prefix):] if path.startswith(prefix) else path


def _python_names(function: Any) -> list[tuple[str, Any]]:
    """The names f's code can reach: its closure's, then its module's (through wrappers such as
    tf.function and functools.wraps, whose own globals are a library's)."""
    named: list[tuple[str, Any]] = []
    seen: set[int] = set()
    current = function
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        code = getattr(current, "__code__", None)
        cells = getattr(current, "__closure__", None) or ()
        if code is not None:
            for name, cell in zip(code.co_freevars, cells):
                try:
                    named.append((name, cell.cell_contents))
                except ValueError:  # an empty cell
                    continue
        named += list(getattr(current, "__globals__", {}).items())
        current = getattr(current, "__wrapped__", None) or getattr(
            current, "python_function", None)
    return [(name, value) for name, value in named if not name.startswith("_")]


def _module_path(module: Any, variable: Any) -> str | None:
    """kernel.lengthscales for a variable inside a tf.Module (GPflow, Sonnet, TFP): its
    attribute path, private parts (a parameter's _pretransformed_input) left out."""
    try:
        found = module._flatten(predicate=lambda v: v is variable, with_path=True)
        path, _ = next(iter(found))
    except (StopIteration, AttributeError, TypeError, ValueError):
        return None
    parts = [str(p) for p in path]
    public = [p for p in parts if not p.startswith("_")]
    return ".".join(public or parts)


# The attribute of a training step's loss that holds its model, whose weights are then named
# inside it (dense/kernel, as a model reloaded from a snapshot names them too).
STEP_MODEL = "__gradcheck_step_model__"


class VariableNames:
    """How the user's code names each variable f reads: dense/kernel for a Keras weight of f or
    of a training step's model (the model's own name left out), the Python name of a variable
    f's code reaches, the attribute path inside a tf.Module it reaches (model.kernel.variance),
    else the variable's own name."""

    def __init__(self, function: Any) -> None:
        self.function = function
        self.models = [function, getattr(function, STEP_MODEL, None)]
        self.names = _python_names(function)
        self._paths: dict[int, str] | None = None  # by id of the tf.Variable, made once

    def _weight_paths(self) -> dict[int, str]:
        """Each Keras weight's path, the first model's that holds it (a model's weights are
        listed once, not once per variable named: ResNet50 reads hundreds)."""
        if self._paths is None:
            self._paths = {}
            for model in self.models:
                for weight in _keras_weights(model):
                    self._paths.setdefault(id(_tf_variable(weight)), weight_path_in(weight, model))
        return self._paths

    def __call__(self, variable: Any) -> str:
        path = self._weight_paths().get(id(variable))
        if path is not None:
            return path
        for name, value in self.names:
            if value is variable:
                return name
        tf = tensorflow()
        for name, value in self.names:
            if isinstance(value, tf.Module) and (path := _module_path(value, variable)):
                return f"{name}.{path}"
        return str(variable.name).split(":")[0]


def unread_weights(function: Any, read: Sequence[Any]) -> list[Any]:
    """Trainable Keras weights (as tf.Variables) that f never read under the tape."""
    weights = _keras_weights(function) + _keras_weights(getattr(function, STEP_MODEL, None))
    was_read = {id(v) for v in read}
    return [_tf_variable(w) for w in weights
            if getattr(w, "trainable", False) and id(_tf_variable(w)) not in was_read]


def unbuilt_layers(function: Any) -> list[str]:
    """Sublayers of a Keras model that were never called, so have no weights at all."""
    layers = getattr(function, "layers", None)
    if not isinstance(layers, (list, tuple)):
        return []
    return [str(layer.name) for layer in layers if not getattr(layer, "built", True)]


def variable_slots(program: Program, read: Sequence[Any]) -> tuple[list[Slot], list[Note]]:
    """Slots for the trainable float variables f read (and a Keras target's trainable weights
    it did not read under the tape) that are not its arguments; notes for the others
    (non-trainable: listed, not checked)."""
    arguments = [slot.value for slot in program.slots if slot.is_variable]
    variable_name = VariableNames(program.function)
    slots: list[Slot] = []
    notes: list[Note] = []
    taken: set[str] = set()
    for variable in [*read, *unread_weights(program.function, read)]:
        if any(variable is a for a in arguments) or variable.dtype.name not in FLOAT_DTYPES:
            continue
        name = variable_name(variable)
        while name in taken or any(s.name == name for s in program.slots):
            name += "'"
        taken.add(name)
        if not getattr(variable, "trainable", True):
            notes.append(NonTrainable(name))
            continue
        slots.append(Slot(name, None, None, variable, True, variable.dtype.name,
                          tuple(int(d) for d in variable.shape), is_variable=True,
                          kind=SlotKind.VARIABLE))
    return slots, notes


def _named(slot: Slot, wrt: str) -> bool:
    """The slot --wrt names: by its name, or a leaf of the structured argument it names."""
    return slot.name == wrt or (bool(slot.keys) and slot.name.startswith(wrt + "["))


def select_sources(slots: Sequence[Slot], wrt: str) -> tuple[tuple[Slot, ...], list[Note]]:
    """The slots, those --wrt leaves out not differentiated, and notes saying so."""
    sources = [slot for slot in slots if slot.differentiable]
    if wrt not in WRT_GROUPS and not any(_named(slot, wrt) for slot in sources):
        known = ", ".join(slot.name for slot in sources) or "none"
        raise InputError(f"--wrt {wrt!r} names no source of f; its sources are: {known}"
                         " (or all, inputs, variables)")

    def left_out(slot: Slot) -> bool:
        return slot.differentiable and not (
            wrt == "all" or _named(slot, wrt)
            or (wrt == "inputs" and slot.argument) or (wrt == "variables" and not slot.argument))

    names = [slot.name for slot in slots if left_out(slot)]
    selected = tuple(replace(slot, differentiable=False) if left_out(slot) else slot
                     for slot in slots)
    return selected, [LeftOut(wrt, tuple(names))] if names else []
