"""What a training snapshot needs from Keras: which Keras trained, the weights by path, saving
and reloading the model (safe mode), the loss fit minimises; and per-weight gradient health
(norms, zero fractions, histograms bucketed in ops XLA compiles), eager and on TensorBoard."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gradcheck.engine.arrays import as_array, dense_values
from gradcheck.engine.runtime import tensorflow
from gradcheck.engine.variables import weight_path, weight_path_in
from gradcheck.evidence import Location
from gradcheck.user_code import is_user_file


def keras_package(model: Any) -> str:
    """The package a model's class comes from: "tf_keras", else "keras" (Keras 3)."""
    for cls in type(model).__mro__:
        if cls.__module__.partition(".")[0] in ("tf_keras", "keras"):
            return cls.__module__.partition(".")[0]
    return "keras"


def save_model(model: Any, path: Path) -> None:
    import warnings

    with warnings.catch_warnings():  # Keras' own about the model's state: not the user's
        warnings.simplefilter("ignore")
        model.save(str(path))


def weight_arrays(model: Any) -> dict[str, np.ndarray]:
    """Every variable's value by path (readable without Keras), in the model's order: a Keras
    model's weights, a tf.Module's variables."""
    from gradcheck.training.step_state import model_variables

    arrays: dict[str, np.ndarray] = {}
    for variable in model_variables(model, metrics=False):
        name = weight_path(variable)
        while name in arrays:
            name += "_"
        arrays[name] = as_array(variable)
    return arrays


def largest_weight(model: Any) -> tuple[str, float] | None:
    """The trainable weight of largest |value| (non-finite values left out), and that value."""
    from gradcheck.training.step_state import model_variables

    tf = tensorflow()
    found: tuple[str, float] | None = None
    for variable in model_variables(model, metrics=False):
        if not getattr(variable, "trainable", False) or not tf.as_dtype(
                variable.dtype).is_floating:
            continue
        # max(max, -min) makes no copy of a large weight; an infinity or a NaN in it (when
        # the reduction keeps NaN) leaves it to the copy that sets them to 0.
        largest = float(tf.cast(tf.maximum(tf.reduce_max(variable), -tf.reduce_min(variable)),
                                tf.float32))
        if not math.isfinite(largest):
            values = tf.abs(tf.cast(variable, tf.float32))
            largest = float(tf.reduce_max(tf.where(tf.math.is_finite(values), values, 0.0)))
        if found is None or largest > found[1]:
            found = (weight_path_in(variable, model), largest)
    return found


def read_outside_the_step(model: Any, name: str) -> str | None:
    """Where the user's layer reads the weight `name` outside call() (once, in build or
    __init__, keeping a tensor the step then reuses): "file:line", from the layer's source."""
    import inspect
    import re

    for layer in getattr(model, "_flatten_layers", lambda: [])():
        for attribute, value in list(vars(layer).items()):
            if not hasattr(value, "assign") or weight_path_in(value, model) != name:
                continue
            try:
                lines, start = inspect.getsourcelines(type(layer))
                path = inspect.getsourcefile(type(layer))
            except (OSError, TypeError):
                return None
            if path is None or not is_user_file(path):  # Keras' own Dense reads it in call()
                continue
            read = re.compile(rf"self\.{re.escape(attribute)}\b(?!\s*=[^=])")
            method = ""
            for number, line in enumerate(lines, start):
                if (found := re.match(r"\s*def (\w+)", line)) is not None:
                    method = found.group(1)
                elif method not in ("call", "") and read.search(line):
                    relative = os.path.relpath(path) if path else ""
                    return f"{path if relative.startswith('..') else relative}:{number}"
    return None


def dropped_output_line(model: Any, name: str, run: Callable[[], Any]) -> Location | None:
    """Where the step reads the weight `name` in an op whose result never reaches the loss (a
    layer called on x whose output is overwritten or dropped): that op's user line, from the
    step traced as a graph (nothing runs)."""
    from gradcheck.forensics.graph import ops_feeding
    from gradcheck.forensics.values import op_location

    tf = tensorflow()
    weight = next((v for v in model.trainable_variables if weight_path_in(v, model) == name),
                  None)
    if weight is None:
        return None
    try:
        graph = tf.function(run, autograph=False).get_concrete_function().graph
    except Exception:  # noqa: BLE001 - a step that cannot be traced has no graph to read
        return None
    handles = {id(internal) for external, internal in graph.captures
               if external is getattr(weight, "handle", None)}
    loss_ancestors = ops_feeding(graph.outputs)
    for op in graph.get_operations():
        if op.type != "ReadVariableOp" or id(op.inputs[0]) not in handles:
            continue
        for consumer in (c for out in op.outputs for c in out.consumers()):
            if consumer in loss_ancestors:
                return None  # it reaches the loss: not dropped
            location = op_location(consumer)
            if location is not None:
                return location
    return None


def assign_weights(model: Any, arrays: dict[str, np.ndarray]) -> None:
    """weight_arrays' values put into a model built again by the user's code: by path, else in
    order; a ValueError (what differs) when the model is not the one that trained."""
    from gradcheck.training.step_state import model_variables

    variables = model_variables(model, metrics=False)
    names = list(weight_arrays(model))
    if sorted(names) != sorted(arrays) and len(variables) != len(arrays):
        raise ValueError(f"the model has {len(variables)} variable(s), the snapshot"
                         f" {len(arrays)}")
    values = [arrays[n] for n in names] if sorted(names) == sorted(arrays) else list(
        arrays.values())
    for variable, name, value in zip(variables, names, values):
        if tuple(variable.shape) != value.shape:
            raise ValueError(f"{name} has shape {tuple(variable.shape)}, the snapshot's"
                             f" {value.shape}")
    for variable, value in zip(variables, values):
        variable.assign(value)


def load_weights(model: Any, path: Path) -> None:
    """The weights of a snapshot's model.keras into a model built again by the user's code."""
    model.load_weights(str(path))


def batch_arrays(batch: Sequence[Any], structure: str) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The batch's names (x, y, sample_weight for fit; arg0, arg1... for a loss_fn's) and its
    arrays by key (a dict of named inputs as x/name)."""
    from gradcheck.training.snapshot import flatten_batch

    names = ("x", "y", "sample_weight") if structure == "xy" else tuple(
        f"arg{i}" for i in range(len(batch)))

    def arrays(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: arrays(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)) and value and not np.isscalar(value[0]):
            return type(value)(arrays(item) for item in value)
        return as_array(value)

    named = {name: arrays(value) for name, value in zip(names, batch) if value is not None}
    return tuple(named), flatten_batch(named)


def versions(package: str) -> dict[str, str]:
    import platform

    tf = tensorflow()
    found = {"python": platform.python_version(), "tensorflow": tf.__version__,
             "numpy": np.__version__}
    with contextlib.suppress(Exception):  # a package without a version
        found[package] = __import__(package).__version__
    return found


def load_model(package: str, path: Path, custom_objects: dict[str, Any],
               safe_mode: bool = True) -> Any:
    """A snapshot's .keras file, in safe mode (no Lambda layer's code is deserialised) unless
    the user trusts the snapshot."""
    keras = __import__("tf_keras" if package == "tf_keras" else "keras")
    return keras.models.load_model(str(path), custom_objects=custom_objects,
                                   safe_mode=safe_mode, compile=True)


def rebind_lambdas(model: Any, modules: Sequence[Any]) -> list[str]:
    """Give each reloaded Lambda layer's code the globals of the user's module that defines the
    names it calls (Keras reloads a lambda with globals of its own); the names no module has."""
    import builtins
    import types

    missing: list[str] = []
    for layer in getattr(model, "_flatten_layers", lambda: [])():
        function = getattr(layer, "function", None)
        if not isinstance(function, types.LambdaType) or function.__name__ != "<lambda>":
            continue
        names = [n for n in _global_names(function.__code__)
                 if n not in function.__globals__ and not hasattr(builtins, n)]
        home = next((m for m in modules if all(hasattr(m, n) for n in names)), None)
        if names and home is None:
            missing += names
        elif names:
            layer.function = types.FunctionType(function.__code__, vars(home), function.__name__,
                                                function.__defaults__, function.__closure__)
    return missing


def _global_names(code: Any) -> list[str]:
    names = list(code.co_names)
    for constant in code.co_consts:
        if hasattr(constant, "co_names"):
            names += _global_names(constant)
    return names


def own_train_step(model: Any) -> bool:
    """Whether the model's class overrides Keras' train_step (a GAN's, a custom loss's)."""
    step = getattr(type(model), "train_step", None)
    module = getattr(step, "__module__", "") or ""
    return step is not None and module.partition(".")[0] not in ("keras", "tf_keras")


def compiled_loss(model: Any) -> bool:
    """Whether fit's loss can be computed: a Keras model compiled with a loss."""
    return callable(getattr(model, "compute_loss", None)) and bool(getattr(model, "loss", None))


def training_loss(model: Any, x: Any, y: Any = None, sample_weight: Any = None) -> Any:
    """The loss fit minimises: the model's compiled loss and its regularisation losses, in
    training mode."""
    y_pred = model(x, training=True)
    try:
        return model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight,
                                  training=True)
    except TypeError:  # tf-keras: compute_loss(x, y, y_pred, sample_weight)
        return model.compute_loss(x, y, y_pred, sample_weight)


def eager_health(gradients: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """A custom-loop step's per-weight gradient norms and zero fractions."""
    norms, zeros = [], []
    for gradient in gradients:
        if gradient is None:
            norms.append(0.0)
            zeros.append(1.0)
            continue
        value = np.asarray(as_array(dense_values(gradient)), np.float64)
        norms.append(float(np.linalg.norm(value)))
        zeros.append(float(np.mean(value == 0)) if value.size else 1.0)
    return np.asarray(norms, np.float32), np.asarray(zeros, np.float32)


def keras_tag(variable: Any, model: Any) -> str:
    """The name Keras' TensorBoard callback gives a weight (Keras 3 its path,
    sequential/dense/kernel; tf-keras its name, dense/kernel_0), so that Watch's summaries of
    it line up beside Keras'; a tf.Module's weight keeps its path in the module."""
    name = (getattr(variable, "path", None) if keras_package(model) == "keras"
            else getattr(variable, "name", None))
    return str(name or weight_path_in(variable, model)).replace(":", "_")


class HealthBoard:
    """Per-weight gradient norms and zero fractions written to TensorBoard (what Keras's
    removed `write_grads` gave), gradient histograms (what `wandb.watch(log="gradients")`
    gives) and the diagnosis of a failing step as text, in LOGDIR/gradcheck: beside the
    train/ and validation/ runs of Keras' TensorBoard callback on the same LOGDIR, each weight
    under the name Keras gives it (TAG/gradient, TAG/gradient_norm, TAG/gradient_zero_fraction
    beside Keras' TAG/histogram)."""

    def __init__(self, logdir: str, model: Any = None) -> None:
        self._writer = tensorflow().summary.create_file_writer(str(Path(logdir) / "gradcheck"))
        self._model = model
        weights = (getattr(model, "trainable_weights", None)
                   or getattr(model, "trainable_variables", None) or ())
        self._tags = {weight_path_in(v, model): keras_tag(v, model) for v in weights}

    def _tag(self, name: str) -> str:
        return self._tags.get(name, name)

    def histograms(self, step: int, names: Sequence[str], gradients: Sequence[Any]) -> None:
        present = [(self._tag(n), g) for n, g in zip(names, gradients) if g is not None]
        if present:
            self._write_histograms(step, [t for t, _ in present],
                                   [histogram_buckets(dense_values(g)) for _, g in present])
        self._writer.flush()

    def _write_histograms(self, step: Any, tags: Sequence[str], buckets: Sequence[Any]) -> None:
        """TAG/gradient histograms from their buckets, as tf.summary.histogram writes them."""
        from tensorboard.plugins.histogram import metadata

        tf = tensorflow()
        described = metadata.create_summary_metadata(display_name=None, description=None)
        with self._writer.as_default(step=tf.cast(step, tf.int64)):
            for tag, counted in zip(tags, buckets):
                tf.summary.write(f"{tag}/gradient", counted, metadata=described)

    def histograms_every(self, log_freq: int, model: Any) -> StepHistograms:
        """What fit's traced step calls: gradient histograms every `log_freq` steps."""
        return StepHistograms(self, log_freq, model)

    def diagnosis(self, step: int, text: str) -> None:
        tf = tensorflow()
        with self._writer.as_default(step=step):
            tf.summary.text("gradcheck/diagnosis", text)
        self._writer.flush()

    def write(self, step: int, names: Sequence[str], norms: np.ndarray,
              zeros: np.ndarray) -> None:
        tf = tensorflow()
        with self._writer.as_default(step=step):
            for name, norm, zero in zip(names, norms, zeros):
                tf.summary.scalar(f"{self._tag(name)}/gradient_norm", float(norm))
                tf.summary.scalar(f"{self._tag(name)}/gradient_zero_fraction", float(zero))
        self._writer.flush()


# TensorBoard's number of histogram buckets (tf.summary.histogram's default).
HISTOGRAM_BUCKETS = 30


def histogram_buckets(values: Any, count: int = HISTOGRAM_BUCKETS) -> Any:
    """TensorBoard's histogram of `values` as tf.summary.histogram buckets them ([count, 3]:
    left edge, right edge, count; a single value makes every edge that value, its count in the
    last bucket), in ops that XLA compiles (no cond, no one-hot)."""
    tf = tensorflow()
    data = tf.cast(tf.reshape(values, [-1]), tf.float64)
    low, high = tf.reduce_min(data), tf.reduce_max(data)
    single = tf.equal(high, low)
    width = tf.where(single, tf.constant(1.0, tf.float64), (high - low) / count)
    index = tf.cast(tf.floor((data - low) / width), tf.int32)
    index = tf.where(single, count - 1, tf.clip_by_value(index, 0, count - 1))
    counts = tf.math.unsorted_segment_sum(tf.ones_like(data), index, count)
    edges = tf.concat([tf.linspace(low, high, count + 1)[:-1], [high]], 0)
    left = tf.where(single, high, edges[:-1])
    right = tf.where(single, high, edges[1:])
    buckets = tf.stack([left, right, counts], axis=1)
    return tf.where(tf.size(data) > 0, buckets, tf.zeros_like(buckets))


class StepHistograms:
    """Gradient histograms every `log_freq` steps of fit's traced step: written in the step, or,
    under jit_compile=True (XLA compiles no summary op), bucketed in the XLA step
    (`computed`) and written outside it (`written`)."""

    def __init__(self, board: HealthBoard, log_freq: int, model: Any) -> None:
        self._board, self._log_freq, self._model = board, log_freq, model
        self.tags: list[str] = []  # of the weights computed() bucketed, in its order

    def _due(self, step: Any) -> Any:
        return tensorflow().equal(step % self._log_freq, 0)

    def _present(self, pairs: Sequence[tuple[Any, Any]]) -> list[Any]:
        self.tags = [keras_tag(v, self._model) for g, v in pairs if g is not None]
        return [dense_values(g) for g, _ in pairs if g is not None]

    def in_step(self, step: Any, pairs: Sequence[tuple[Any, Any]]) -> Any:
        gradients = self._present(pairs)
        return self.written(step, [histogram_buckets(g) for g in gradients])

    def computed(self, step: Any, pairs: Sequence[tuple[Any, Any]]) -> Any:
        """Every gradient's buckets as one [weights, buckets, 3] tensor (zeros but every
        `log_freq` steps)."""
        tf = tensorflow()
        gradients = self._present(pairs)
        shape = [len(gradients), HISTOGRAM_BUCKETS, 3]
        if not gradients:
            return tf.zeros(shape, tf.float64)
        return tf.cond(self._due(step),
                       lambda: tf.stack([histogram_buckets(g) for g in gradients]),
                       lambda: tf.zeros(shape, tf.float64))

    def written(self, step: Any, buckets: Any) -> Any:
        """The histograms written at a step that is due (buckets: a list, or computed()'s)."""
        tf = tensorflow()

        def write() -> Any:
            self._board._write_histograms(step, self.tags,
                                          [buckets[i] for i in range(len(self.tags))])
            return tf.constant(True)

        return tf.cond(self._due(step), write, lambda: tf.constant(False))
