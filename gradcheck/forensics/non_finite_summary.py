"""What a tensor's NaN and infinite elements are, computed inside its graph: how many, the
first one's position, whether one is NaN or which sign its infinities have. A model's
gradients are described without copying them out of the graph (a large model's are all NaN)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class NonFiniteSummary:
    """A tensor's non-finite elements, as `np.isfinite` of its value would count them."""

    count: int
    size: int
    nan: bool
    positive_infinity: bool
    first: tuple[int, ...]  # the first non-finite element's index (() for a scalar)

    @property
    def produced(self) -> str:
        """NaN, inf or -inf, as a value with NaN and infinities is described (NaN first)."""
        return "NaN" if self.nan else "inf" if self.positive_infinity else "-inf"


# Tensors smaller than this are fetched whole (with the values around the first non-finite
# op, in the same run): 4 KiB of float32, against 15 graph nodes to summarise one.
SMALLEST_SUMMARISED = 1024


def summarisable(tensor: Any) -> bool:
    """A large real float tensor of a fully known shape (the index of its first element needs
    it): finite_flags.py computes its summary in the graph."""
    return bool(tensor.dtype.is_floating and tensor.shape.is_fully_defined()
                and tensor.shape.num_elements() >= SMALLEST_SUMMARISED)


def read_summaries(tensors: Sequence[Any], computed: Any) -> dict[str, NonFiniteSummary]:
    """The summaries (by tensor name) of the tensors finite_flags described."""
    found = {}
    for tensor, (count, first, nan, positive) in zip(tensors, np.asarray(computed).tolist()):
        shape = tuple(tensor.shape.as_list())
        index = tuple(int(i) for i in np.unravel_index(first, shape)) if shape and count \
            else ()
        found[tensor.name] = NonFiniteSummary(int(count), int(np.prod(shape, dtype=np.int64)),
                                              bool(nan), bool(positive), index)
    return found
