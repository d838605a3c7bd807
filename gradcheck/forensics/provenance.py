"""Where the first non-finite op's argument comes from: the traced graph walked back from the op
to what feeds it (a batch feature out of scale, an infinite constant fill, a mask argument
holding infinities, a log term whose coefficient rewards its argument going to 0), with, for
each source that can be changed in the graph, the change to try (the tensor to feed and its
new value). Facts only; non_finite.py tries the changes."""

from __future__ import annotations

import ast
import linecache
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcheck.evidence import Location
from gradcheck.evidence.causes.sources import (
    Change,
    FractionalPower,
    InfiniteFill,
    InfiniteMask,
    LogOfMask,
    OutsideSupport,
    Source,
    Trial,
    UnboundedTerm,
    UnscaledFeature,
)
from gradcheck.forensics.values import TracedValues, op_location

# How far back the walk goes (ops); a model's whole forward pass is rarely needed.
_REACH = 400
# A feature this large is far from the unit scale initialisers and activations assume.
UNSCALED = 1e3
_LABELS = frozenset({"y", "y_true", "labels", "label", "target", "targets"})


@dataclass(frozen=True)
class Candidate:
    """A source and the change that would remove it: tensors (by name) fed new values, and
    the trial that change makes (not yet run)."""

    source: Source
    feeds: dict[str, np.ndarray] = field(default_factory=dict)
    trial: Trial | None = None


def _ancestors(traced: TracedValues, op: Any) -> Iterator[Any]:
    """The forward ops feeding `op` (itself first), nearest first."""
    seen: set[str] = set()
    frontier = [op]
    while frontier and len(seen) < _REACH:
        current = frontier.pop(0)
        if current.name in seen or current.name not in traced.index:
            continue
        seen.add(current.name)
        yield current
        frontier += [t.op for t in current.inputs]


def _argument(value: np.ndarray | None, arguments: Mapping[str, np.ndarray]) -> str | None:
    if value is None:
        return None
    return next((name for name, array in arguments.items() if array.shape == value.shape
                 and array.dtype.kind == "f" and value.dtype.kind == "f"
                 and np.allclose(array, value, equal_nan=True)), None)


def _finite_fill(value: np.ndarray) -> np.ndarray:
    big = min(1e9, float(np.finfo(value.dtype).max) / 2)
    return np.where(np.isinf(value), np.sign(value) * big, value).astype(value.dtype)


def _standardised(value: np.ndarray) -> np.ndarray:
    axes = tuple(range(value.ndim - 1))
    mean = value.mean(axis=axes, keepdims=True, dtype=np.float64)
    std = value.std(axis=axes, keepdims=True, dtype=np.float64)
    return ((value - mean) / np.where(std > 0, std, 1.0)).astype(value.dtype)


def _sample(bad: np.ndarray, rows: int | None) -> int | None:
    """The batch row of the first non-finite element of `bad`, when its first axis is the
    batch's."""
    if rows is None or bad.ndim == 0 or bad.shape[0] != rows:
        return None
    flat = int(np.argmax(~np.isfinite(bad.reshape(-1))))
    return int(np.unravel_index(flat, bad.shape)[0])


def _first_nan_downstream(traced: TracedValues, op: Any, rows: int | None) -> int | None:
    """The batch row of the first NaN an op downstream of `op` makes (where an infinite fill
    becomes NaN: the fully masked row)."""
    frontier, seen = [op], set[str]()
    while frontier and len(seen) < _REACH:
        current = frontier.pop(0)
        if current.name in seen or current.name not in traced.index or traced.is_backward(
                current):
            continue
        seen.add(current.name)
        for out in current.outputs:
            value = traced.value(out) if traced.bad(out) else None
            if value is not None and value.dtype.kind == "f" and value.ndim and \
                    np.isnan(value).any() and value.shape[0] == rows:
                return int(np.unravel_index(int(np.argmax(np.isnan(value).reshape(-1))),
                                            value.shape)[0])
            frontier += traced.consumers(out)
    return None


def _rows(arguments: Mapping[str, np.ndarray]) -> int | None:
    shaped = [a.shape[0] for a in arguments.values() if a.ndim]
    return shaped[0] if shaped and all(n == shaped[0] for n in shaped) else None


def _layer(op: Any) -> str:
    """The Keras layer whose scope holds `op` (sequential/dense/Cast: dense)."""
    parts = op.name.split("/")
    return parts[-2] if len(parts) >= 3 else ""


def sources(traced: TracedValues, forward: Any, bad: np.ndarray,
            arguments: Mapping[str, np.ndarray]) -> list[Candidate]:
    """The sources of the non-finite value `bad` that `forward` made, most specific first."""
    found: list[Candidate] = []
    rows = _rows(arguments)
    dtype = next((t.dtype.as_numpy_dtype for t in forward.outputs if t.dtype.is_floating), None)
    dtype_max = float(np.finfo(dtype).max) if dtype is not None else 0.0
    for op in _ancestors(traced, forward):
        if op.type not in ("Const", "Placeholder"):
            continue
        value = traced.value(op.outputs[0])
        if value is None or value.dtype.kind != "f":
            continue
        name = _argument(value, arguments)
        tensor = op.outputs[0].name
        if name is None and np.isinf(value).any():
            found.append(Candidate(
                InfiniteFill(value=float(value[np.isinf(value)].flat[0]), at=op_location(op),
                             sample=_first_nan_downstream(traced, forward, rows)),
                {tensor: _finite_fill(value)},
                Trial(Change.FINITE_FILL, value=float(value[np.isinf(value)].flat[0]))))
        elif name is not None and name not in _LABELS and np.isinf(value).any():
            found.append(Candidate(
                InfiniteMask(argument=name, value=float(value[np.isinf(value)].flat[0]),
                             count=int(np.isinf(value).sum())),
                {tensor: _finite_fill(value)}, Trial(Change.FINITE_MASK, subject=name)))
        elif name is not None and name not in _LABELS and value.ndim >= 2 and np.all(
                np.isfinite(value)):
            feature = _unscaled(value, dtype_max, forward, bad, rows, name)
            if feature is not None:
                found.append(Candidate(feature, {tensor: _standardised(value)},
                                       Trial(Change.STANDARDISED, subject=name)))
    powered = _fractional_power(traced, forward)
    if powered is not None:
        found.insert(0, powered)
    logged = _log_of_mask(traced, forward, rows)
    if logged is not None:
        found.insert(0, logged)
    outside = _outside_support(forward)
    if outside is not None:
        found.insert(0, outside)
    unbounded = _unbounded_term(traced, forward, bad)
    if unbounded is not None:
        found.append(Candidate(unbounded))
    return found


# TensorFlow Probability distributions' methods that evaluate a formula at a value (their name
# scope: Beta/log_prob/...).
_DENSITY_METHODS = frozenset({"log_prob", "prob", "cdf", "log_cdf", "survival_function",
                              "log_survival_function"})
_TFP_DISTRIBUTIONS = "tensorflow_probability/python/distributions/"


def _outside_support(forward: Any) -> Candidate | None:
    """The distribution method (Beta.log_prob) whose formula the op evaluates, when the op is
    TensorFlow Probability's: the value it was given may lie outside the support."""
    scopes = forward.name.split("/")[:-1]
    method = next((i for i, part in enumerate(scopes) if part in _DENSITY_METHODS and i), None)
    frames = getattr(forward, "traceback", None) or ()
    if method is None or not any(_TFP_DISTRIBUTIONS in frame.filename.replace("\\", "/")
                                 for frame in frames):
        return None
    distribution = re.sub(r"_\d+$", "", scopes[method - 1])
    return Candidate(OutsideSupport(distribution=distribution, method=scopes[method],
                                    at=op_location(forward)))


def _fractional_power(traced: TracedValues, forward: Any) -> Candidate | None:
    """A Pow whose constant exponent is in (0, 1) and whose base is 0 somewhere; the change: the
    base clipped to a small positive value."""
    if forward.type != "Pow" or len(forward.inputs) != 2:
        return None
    base, exponent = (traced.value(t) for t in forward.inputs)
    if base is None or exponent is None or exponent.size != 1 or base.dtype.kind != "f":
        return None
    power = float(exponent.reshape(-1)[0])
    if not 0 < power < 1 or not (base == 0).any():
        return None
    at = op_location(forward)
    tiny = float(np.finfo(base.dtype).eps)
    return Candidate(FractionalPower(exponent=power, at=at, names=_hyperparameters(at)),
                     {forward.inputs[0].name: np.maximum(base, tiny).astype(base.dtype)},
                     Trial(Change.CLIPPED_BASE, value=tiny))


def _log_of_mask(traced: TracedValues, forward: Any, rows: int | None) -> Candidate | None:
    """A Log of a 0/1 mask with zeros (an additive mask built as log(mask)); the change: its
    -inf entries made -1e9."""
    if forward.type != "Log" or not forward.inputs or traced.is_backward(forward):
        return None
    argument = traced.value(forward.inputs[0])
    output = traced.value(forward.outputs[0])
    if argument is None or output is None or argument.dtype.kind != "f" or not np.all(
            np.isin(argument, (0.0, 1.0))) or not (argument == 0).any():
        return None
    return Candidate(LogOfMask(at=op_location(forward),
                               sample=_first_nan_downstream(traced, forward, rows)),
                     {forward.outputs[0].name: _finite_fill(output)},
                     Trial(Change.FINITE_LOG_MASK))


def _unscaled(value: np.ndarray, dtype_max: float, forward: Any, bad: np.ndarray,
              rows: int | None, name: str) -> UnscaledFeature | None:
    columns = np.abs(value.reshape(-1, value.shape[-1])).max(axis=0)
    column = int(np.argmax(columns))
    largest = float(columns[column])
    if largest < UNSCALED and largest <= dtype_max:
        return None
    values = value.reshape(-1, value.shape[-1])[:, column]
    others = float(np.delete(columns, column).max()) if columns.size > 1 else 0.0
    overflow = largest > dtype_max > 0
    return UnscaledFeature(
        argument=name, column=column, low=float(values.min()), high=float(values.max()),
        others=others, sample=_sample(bad, rows), dtype=str(np.dtype(forward.outputs[0]
                                                                      .dtype.as_numpy_dtype)),
        dtype_max=dtype_max, layer=_layer(forward) if overflow and forward.type == "Cast" else "",
        unscaled=int(np.sum(columns >= UNSCALED)) or 1, features=int(columns.size))


def _upstream_of(traced: TracedValues, forward: Any) -> np.ndarray | None:
    """The gradient arriving at `forward`'s output in the backward pass (the input of its
    gradient's ops that the forward pass did not make)."""
    mine = [op for op in traced.ops if traced.is_backward(op)
            and traced.forward_of.get(traced.index[op.name]) is forward]
    made = {op.name for op in mine}
    for op in mine:
        for tensor in op.inputs:
            if tensor.op.name not in made and traced.is_backward(tensor.op) and \
                    tensor.shape == forward.outputs[0].shape:
                return traced.value(tensor)
    return None


def _unbounded_term(traced: TracedValues, forward: Any, bad: np.ndarray) -> UnboundedTerm | None:
    """A Log whose output the loss rewards going down (a positive gradient where it is -inf):
    the loss falls without bound as the log's argument goes to 0."""
    if forward.type != "Log" or traced.is_backward(forward):
        return None
    upstream = _upstream_of(traced, forward)
    if upstream is None or upstream.shape != bad.shape:
        return None
    # The loss falls as the log falls, everywhere (a log-likelihood's term rises with it).
    if not np.isneginf(bad).any() or not (np.all(upstream >= 0) and np.any(upstream > 0)):
        return None
    line = _coefficient_line(traced, forward)
    return UnboundedTerm(at=line, names=_hyperparameters(line))


def _coefficient_line(traced: TracedValues, forward: Any) -> Location | None:
    """The user's line of the first scalar constant multiplying the log's output downstream."""
    frontier, seen = [forward], set[str]()
    while frontier and len(seen) < 50:
        op = frontier.pop(0)
        if op.name in seen or op.name not in traced.index or traced.is_backward(op):
            continue
        seen.add(op.name)
        for out in op.outputs:
            for consumer in traced.consumers(out):
                if consumer.type == "Mul" and any(
                        t.op.type == "Const" and t.shape.rank == 0 for t in consumer.inputs):
                    return op_location(consumer)
                frontier.append(consumer)
    return op_location(forward)


_NAMED_NUMBER = re.compile(r"\b([A-Za-z_]\w*)\s*=\s*([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\b")


def _hyperparameters(line: Location | None) -> tuple[tuple[str, float], ...]:
    """The names read on `line` that the same file sets to a number (a default, a keyword or
    an assignment): the hyperparameters of that expression."""
    if line is None or line.line is None:
        return ()
    path = line.path
    text = linecache.getline(path, line.line)
    try:
        names = {n.id for n in ast.walk(ast.parse(text.strip())) if isinstance(n, ast.Name)}
    except SyntaxError:
        return ()
    found: dict[str, float] = {}
    for source_line in linecache.getlines(path)[:line.line]:
        for name, number in _NAMED_NUMBER.findall(source_line):
            if name in names:
                found[name] = float(number)
    return tuple(found.items())
