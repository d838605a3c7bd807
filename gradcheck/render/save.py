"""--save FILE.npz: the numbers behind the pictures, keyed "y/x/autodiff", ..., "x/vjp"."""

from __future__ import annotations

import io
import os

import numpy as np

from gradcheck.render.blocks import all_blocks
from gradcheck.render.files import write_file
from gradcheck.report import Report

# Per (output, input) block, in the order they are stored; arrays have the block's shape
# (output shape + input shape), the upstream the output's shape.
BLOCK_FIELDS = ("autodiff", "finite_difference", "error_estimate", "allowed", "upstream")


def block_arrays(report: Report) -> dict[str, np.ndarray]:
    """Every kept block's arrays as "OUTPUT/INPUT/FIELD", and each input's VJP (uᵀJ summed
    over the outputs, as tape.gradient returns it) as "INPUT/vjp". A cut path has no
    autodiff key (autodiff returned None); `allowed` is NaN at kinks."""
    arrays: dict[str, np.ndarray] = {}
    for block in all_blocks(report):
        for field in BLOCK_FIELDS:
            value = getattr(block, field)
            if value is not None:
                arrays[f"{block.output}/{block.input}/{field}"] = np.asarray(value)
        if block.vjp is not None:
            arrays.setdefault(f"{block.input}/vjp", np.asarray(block.vjp))
    return arrays


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def write_npz(path: str | os.PathLike[str], arrays: dict[str, np.ndarray]) -> str:
    return write_file(path, npz_bytes(arrays), make_folders=True)
