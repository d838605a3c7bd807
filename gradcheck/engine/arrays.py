"""Tensors as NumPy arrays, bfloat16 scalars included (np.asarray refuses a 0-d bfloat16
EagerTensor); a gradient's values as one tensor."""

from __future__ import annotations

from typing import Any

import numpy as np


def as_array(value: Any) -> np.ndarray:
    """The NumPy value of a tensor, variable, IndexedSlices-free nest element or array."""
    numpy = getattr(value, "numpy", None)
    return np.asarray(numpy() if callable(numpy) else value)


def dense_values(gradient: Any) -> Any:
    """A gradient's values as one tensor (an IndexedSlices' values)."""
    values = getattr(gradient, "values", None)  # IndexedSlices
    return gradient if values is None or hasattr(gradient, "numpy") else values
