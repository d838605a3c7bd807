"""Ops whose registered gradient TensorFlow gets wrong at the values f gives them (duplicate
indices in tensor_scatter_nd_update or dynamic_stitch: the gradient reaches every writer,
the value only the last; an SVD's or eigh's vectors at repeated values; complex
tf.linalg.det), or gets wrong under XLA only (complex Sqrt), found in the ops f runs eagerly,
with the user's line."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.engine.program import Program
from gradcheck.engine.recorded import RecordedOp, ops_on_path
from gradcheck.evidence import Location
from gradcheck.evidence.causes import WrongGradientReason
from gradcheck.forensics.cut_ops import frames_location
from gradcheck.forensics.op_types import SPECTRAL, spectral_gap

# TensorFlow's registered gradients of these ops are wrong for complex inputs, eagerly too
# (they leave out a conjugate, or assume a real upstream; measured against finite differences
# on TF 2.21: tensorflow/tensorflow#49946, #127713).
_COMPLEX_WRONG_OPS = frozenset({
    "MatrixDeterminant", "LogMatrixDeterminant", "MatrixSquareRoot", "SquaredDifference",
    "Xlogy", "Xlog1py", "Xdivy", "MulNoNan", "Cumprod", "UnsortedSegmentProd"})
# XLA's kernels for these ops' gradients leave out the conjugate that the eager kernels apply
# to complex inputs (measured on TF 2.21, tensorflow/tensorflow#62263, #62268; tf.pow and
# division are right under XLA): op -> its gradient's kernel.
XLA_UNCONJUGATED_KERNELS = {"Sqrt": "SqrtGrad", "Rsqrt": "RsqrtGrad",
                            "Reciprocal": "ReciprocalGrad", "Inv": "InvGrad"}
# TensorFlow's own functions whose gradient is a tf.custom_gradient of TensorFlow's that leaves
# out the conjugate, so it is wrong for complex inputs (tensorflow/tensorflow#57357, tf-keras
# #455): (file, function inside which the forward ops run) -> the function the user called.
_UNCONJUGATED_CUSTOM_GRADIENTS = {("nn_impl.py", "swish_impl"): "tf.nn.silu (tf.nn.swish)"}
# tf.nn.silu's own tf.custom_gradient sums beta's gradient to a scalar and returns features'
# at the broadcast shape, whatever their shapes (tensorflow/tensorflow#127690, measured on TF
# 2.21): the product beta * features that feeds its sigmoid shows the shapes it was given.
_BROADCAST_CUSTOM_GRADIENTS = {("nn_impl.py", "swish_impl"): "tf.nn.silu (tf.nn.swish)"}


@dataclass(frozen=True)
class WrongTensorFlowGradient:
    """TensorFlow's gradient of op type `op` is wrong at this call, for `reason`."""

    op: str
    reason: WrongGradientReason
    location: Location | None


def _duplicate_rows(indices: Any) -> bool:
    values = np.asarray(indices.numpy())
    rows = values.reshape(-1, values.shape[-1] if values.ndim > 1 else 1)
    return len({tuple(row) for row in rows.tolist()}) < len(rows)


def _stitched_duplicates(op: RecordedOp) -> bool:
    half = len(op.inputs) // 2
    flat = np.concatenate([np.ravel(t.numpy()) for t in op.inputs[:half]])
    return len(np.unique(flat)) < len(flat)


# Values closer than this many ulps (of their scale) count as repeated.
_REPEATED_ULPS = 1000.0


def _repeated_spectrum(op: RecordedOp) -> bool:
    """A decomposition that computed its vectors at values that repeat."""
    values, vectors = SPECTRAL[op.type]
    if not all(int(np.prod(op.outputs[i].shape)) for i in vectors):
        return False
    spectrum = np.asarray(op.outputs[values].numpy())
    gap = spectral_gap(spectrum) if spectrum.dtype.kind == "f" else None
    return gap is not None and gap <= _REPEATED_ULPS * float(np.finfo(spectrum.dtype).eps)


def _complex(op: RecordedOp) -> bool:
    return any(getattr(t, "dtype", None) is not None and t.dtype.is_complex for t in op.inputs)


def _inside(op: RecordedOp, functions: dict[tuple[str, str], str]) -> str | None:
    """The TensorFlow function (as the user calls it) whose body, one of `functions`' (file,
    function), runs the op."""
    return next((public for frame in op.traceback
                 for (file, function), public in functions.items()
                 if frame.name == function and frame.filename.endswith(
                     os.path.join("tensorflow", "python", "ops", file))), None)


def _unconjugated_custom_gradient(op: RecordedOp) -> str | None:
    """The TensorFlow function (tf.nn.silu) whose own custom gradient, wrong for complex
    inputs, the op runs inside of, when its inputs are complex."""
    return _inside(op, _UNCONJUGATED_CUSTOM_GRADIENTS) if _complex(op) else None


def _broadcast_custom_gradient(op: RecordedOp, ops: list[RecordedOp]) -> str | None:
    """The TensorFlow function (tf.nn.silu) whose own custom gradient returns the wrong shapes
    for the shapes it was given: the op is its beta * features, feeding its sigmoid, and beta
    is not a scalar or features is broadcast."""
    if op.type != "Mul" or len(op.inputs) != 2 or not any(
            other.type == "Sigmoid" and other.inputs and other.inputs[0] is op.outputs[0]
            for other in ops):
        return None
    beta, features = op.inputs
    if beta.shape.rank == 0 and features.shape == op.outputs[0].shape:
        return None
    return _inside(op, _BROADCAST_CUSTOM_GRADIENTS)


def _wrong_here(op: RecordedOp, ops: list[RecordedOp]) -> tuple[str, WrongGradientReason] | None:
    """(The op as named, the reason) when TensorFlow's gradient of it is wrong here (`ops`:
    the others on the path)."""
    if (public := _broadcast_custom_gradient(op, ops)) is not None:
        return public, WrongGradientReason.BROADCAST_CUSTOM_GRADIENT
    if op.type == "TensorScatterUpdate" and _duplicate_rows(op.inputs[1]):
        return op.type, WrongGradientReason.DUPLICATE_INDICES
    if op.type in ("DynamicStitch", "ParallelDynamicStitch") and _stitched_duplicates(op):
        return op.type, WrongGradientReason.DUPLICATE_INDICES
    if op.type in SPECTRAL and _repeated_spectrum(op):
        return op.type, WrongGradientReason.REPEATED_SPECTRUM
    if (public := _unconjugated_custom_gradient(op)) is not None:
        return public, WrongGradientReason.COMPLEX_CUSTOM_GRADIENT
    if op.type in _COMPLEX_WRONG_OPS and _complex(op):
        return op.type, WrongGradientReason.COMPLEX_GRADIENT
    if op.type in XLA_UNCONJUGATED_KERNELS and _complex(op):
        return op.type, WrongGradientReason.XLA_UNCONJUGATED
    return None


def wrong_tensorflow_gradients(program: Program, slot_index: int
                               ) -> list[WrongTensorFlowGradient]:
    """The ops on the path from one source whose TensorFlow gradient is wrong here."""
    ops = ops_on_path(program, slot_index)
    return [WrongTensorFlowGradient(found[0], found[1], frames_location(op.traceback))
            for op in ops if (found := _wrong_here(op, ops)) is not None]
