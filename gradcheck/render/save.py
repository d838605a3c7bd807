"""--save FILE.npz: the numbers behind the pictures, keyed "y/x/autodiff", ..., "x/vjp"."""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path

import numpy as np

from gradcheck.errors import UsageError
from gradcheck.render.blocks import all_blocks
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


def write_atomically(path: str | os.PathLike[str], data: bytes) -> str:
    """Write DATA to PATH through a temporary file in the same folder, so that PATH is either
    the old file or the whole new one; a folder that cannot be written is a UsageError."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data)
            os.chmod(temporary, 0o644)  # mkstemp's 0600 is for the temporary only
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise UsageError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from exc
    return str(target)


def write_npz(path: str | os.PathLike[str], arrays: dict[str, np.ndarray]) -> str:
    return write_atomically(path, npz_bytes(arrays))
