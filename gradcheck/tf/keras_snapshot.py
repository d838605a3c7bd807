"""What a training snapshot needs from Keras: which Keras trained, the weights by path, saving
and reloading the model (safe mode), the loss fit minimises; and per-weight gradient health
(norms, zero fractions), eager and on TensorBoard."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gradcheck.tf.arrays import as_array, dense_values
from gradcheck.tf.runtime import tensorflow
from gradcheck.tf.variables import weight_path


def keras_package(model: Any) -> str:
    """The package a model's class comes from: "tf_keras", else "keras" (Keras 3)."""
    for cls in type(model).__mro__:
        if cls.__module__.partition(".")[0] in ("tf_keras", "keras"):
            return cls.__module__.partition(".")[0]
    return "keras"


def save_model(model: Any, path: Path) -> None:
    model.save(str(path))


def weight_arrays(model: Any) -> dict[str, np.ndarray]:
    """Every weight's value by path (readable without Keras)."""
    arrays: dict[str, np.ndarray] = {}
    for variable in model.weights:
        name = weight_path(variable)
        while name in arrays:
            name += "_"
        arrays[name] = as_array(variable)
    return arrays


def versions(package: str) -> dict[str, str]:
    import platform

    tf = tensorflow()
    found = {"python": platform.python_version(), "tensorflow": tf.__version__,
             "numpy": np.__version__}
    with contextlib.suppress(Exception):  # a package without a version
        found[package] = __import__(package).__version__
    return found


def load_model(package: str, path: Path, custom_objects: dict[str, Any]) -> Any:
    """A snapshot's .keras file in safe mode (no lambda code is deserialised)."""
    keras = __import__(package)
    return keras.models.load_model(str(path), custom_objects=custom_objects, safe_mode=True,
                                   compile=True)


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


class HealthBoard:
    """Per-weight gradient norms and zero fractions written to TensorBoard (what Keras's
    removed `write_grads` gave)."""

    def __init__(self, logdir: str) -> None:
        self._writer = tensorflow().summary.create_file_writer(logdir)

    def write(self, step: int, names: Sequence[str], norms: np.ndarray,
              zeros: np.ndarray) -> None:
        tf = tensorflow()
        with self._writer.as_default(step=step):
            for name, norm, zero in zip(names, norms, zeros):
                tf.summary.scalar(f"gradient_norm/{name}", float(norm))
                tf.summary.scalar(f"gradient_zero_fraction/{name}", float(zero))
        self._writer.flush()
