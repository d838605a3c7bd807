"""Large Jacobian blocks pooled for drawing: each tile of elements becomes one cell (its
largest magnitude, its largest excess, whether any element fails)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gradcheck.render.blocks import BlockView

# Larger matrices are pooled to at most this many cells per axis: a picture cannot show more,
# and drawing would take long.
MAX_CELLS = 600


def _pool(matrix: np.ndarray, rows: int, columns: int, how: str) -> np.ndarray:
    """Tiles of rows x columns elements, each reduced to its largest magnitude (signed), its
    maximum, or whether any element is set."""
    m, n = matrix.shape
    padded_m, padded_n = -(-m // rows) * rows, -(-n // columns) * columns
    fill = {"magnitude": 0.0, "max": np.nan, "any": False}[how]
    padded = np.full((padded_m, padded_n), fill, dtype=matrix.dtype)
    padded[:m, :n] = matrix
    tiles = padded.reshape(padded_m // rows, rows, padded_n // columns, columns)
    tiles = tiles.transpose(0, 2, 1, 3).reshape(padded_m // rows, padded_n // columns, -1)
    if how == "any":
        return np.asarray(tiles.any(axis=-1))
    if how == "max":
        with np.errstate(all="ignore"):
            finite = np.where(np.isnan(tiles), -np.inf, tiles)
            best = finite.max(axis=-1)
        return np.where(np.isneginf(best), np.nan, best)
    pick = np.argmax(np.abs(np.nan_to_num(tiles)), axis=-1)
    return np.take_along_axis(tiles, pick[..., None], axis=-1)[..., 0]


@dataclass(frozen=True)
class Drawn:
    """The matrices as drawn (pooled when large) and the tile size."""

    autodiff: np.ndarray
    finite_difference: np.ndarray
    excess: np.ndarray
    failing: np.ndarray
    tile: tuple[int, int]


def tile_of(shape: tuple[int, int]) -> tuple[int, int]:
    """Rows and columns of elements per drawn cell."""
    return max(1, math.ceil(shape[0] / MAX_CELLS)), max(1, math.ceil(shape[1] / MAX_CELLS))


def drawn_matrices(view: BlockView) -> Drawn:
    """The block's matrices as drawn: itself, or pooled to at most MAX_CELLS per axis."""
    ad = view.autodiff if view.autodiff is not None else np.zeros_like(view.finite_difference)
    tile = tile_of(view.shape)
    if tile == (1, 1):
        return Drawn(ad, view.finite_difference, view.excess, view.failing, tile)
    return Drawn(_pool(ad, *tile, "magnitude"), _pool(view.finite_difference, *tile, "magnitude"),
                 _pool(view.excess, *tile, "max"), _pool(view.failing, *tile, "any"), tile)
