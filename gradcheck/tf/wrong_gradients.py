"""Ops whose registered gradient TensorFlow gets wrong at the values f gives them (duplicate
indices in tensor_scatter_nd_update or dynamic_stitch: the gradient reaches every writer,
the value only the last), found in the ops f runs eagerly, with the user's line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.evidence import Location
from gradcheck.tf.cut_ops import frames_location
from gradcheck.tf.program import Program
from gradcheck.tf.recorded import RecordedOp, ops_on_path

DUPLICATE_INDICES = "duplicate-indices"


@dataclass(frozen=True)
class WrongTensorFlowGradient:
    """TensorFlow's gradient of op type `op` is wrong at this call, for `reason`."""

    op: str
    reason: str
    location: Location | None


def _duplicate_rows(indices: Any) -> bool:
    values = np.asarray(indices.numpy())
    rows = values.reshape(-1, values.shape[-1] if values.ndim > 1 else 1)
    return len({tuple(row) for row in rows.tolist()}) < len(rows)


def _stitched_duplicates(op: RecordedOp) -> bool:
    half = len(op.inputs) // 2
    flat = np.concatenate([np.ravel(t.numpy()) for t in op.inputs[:half]])
    return len(np.unique(flat)) < len(flat)


def _wrong_here(op: RecordedOp) -> str | None:
    if op.type == "TensorScatterUpdate" and _duplicate_rows(op.inputs[1]):
        return DUPLICATE_INDICES
    if op.type in ("DynamicStitch", "ParallelDynamicStitch") and _stitched_duplicates(op):
        return DUPLICATE_INDICES
    return None


def wrong_tensorflow_gradients(program: Program, slot_index: int
                               ) -> list[WrongTensorFlowGradient]:
    """The ops on the path from one source whose TensorFlow gradient is wrong here."""
    return [WrongTensorFlowGradient(op.type, reason, frames_location(op.traceback))
            for op in ops_on_path(program, slot_index)
            if (reason := _wrong_here(op)) is not None]
