"""Sentences of the precision check."""

from __future__ import annotations

import math

from gradcheck.evidence.precision import FloatHead, NoFloat32Copy, PrecisionLoss, ValueLost
from gradcheck.render.sentences.dispatch import sentence
from gradcheck.report import CheckResult


def _share(value: float) -> str:
    return f"{100 * value:.3g}%"


def _head(head: FloatHead | None, dtype: str) -> str:
    """The known pitfall, when the output layer alone in float32 is the fix."""
    if head is None:
        return ""
    policy = (f"under the {head.policy} policy" if head.policy.startswith("mixed")
              else f"(dtype={head.policy})")
    return (f"; the known pitfall: the output layer {head.layer} ({head.kind}) of {head.model}"
            f" computes in {dtype} {policy}; give it dtype='float32' (Keras mixed-precision"
            " guide: the model's last layer, its softmax and the loss in float32): with that"
            " layer alone in float32, f's value and gradients match float32's")


@sentence.register
def _precision(evidence: PrecisionLoss, result: CheckResult) -> str:
    dtype, source = evidence.dtype, result.input
    scaled = f" (loss scale {evidence.scaled:g})" if evidence.scaled != 1.0 else ""
    figures = (f"{_share(evidence.underflow)} of its nonzero float32 elements are 0 in {dtype}"
               f" and {_share(evidence.subnormal)} subnormal, {_share(evidence.overflow)}"
               f" overflow; error {evidence.error:.2g} of the float32 gradient's norm (allowed"
               f" {evidence.allowed:.2g})")
    if evidence.loss_scale is None:
        scale = ""
    else:
        left = (f", which still leaves {_share(evidence.scaled_underflow)} below {dtype}'s"
                " smallest normal" if evidence.scaled_underflow else "")
        scale = (f"; a loss scale of {evidence.loss_scale:g} (2^"
                 f"{round(math.log2(evidence.loss_scale))}) brings it into"
                 f" {dtype}'s range{left} (keras.mixed_precision.LossScaleOptimizer finds one"
                 " dynamically)")
    bf16 = ("; bfloat16 (mixed_bfloat16) would keep it without a loss scale: it has float32's"
            " range, with 3 significant digits" if evidence.bfloat16_serves else "")
    if result.status == "pass":
        return (f"the {dtype} gradient for {source}{scaled} matches float32's within what"
                f" {dtype} explains: {figures}")
    if result.status == "warn":
        return (f"the {dtype} gradient for {source}{scaled} matches float32's, but"
                f" {_share(evidence.subnormal)} of it is subnormal in {dtype}: a gradient a few"
                f" times smaller would underflow to 0 ({figures})" + scale + bf16)
    if evidence.overflow:
        first = f" (the first op that overflows: {result.location})" if result.location else ""
        what = (f"the {dtype} gradient for {source}{scaled} overflows where float32's is"
                f" finite{first}: {figures}")
        what += _head(evidence.head, dtype) or (
            "; under a mixed policy the layers that can overflow (a hand-written softmax or"
            " exp, the output head, the loss) belong in float32: dtype='float32' on them, or"
            " keras.layers.Activation('softmax', dtype='float32')")
    elif evidence.underflow > 0:
        what = (f"the {dtype} gradient for {source}{scaled} underflows: {figures}; these"
                " weights stop learning")
    else:
        what = (f"the {dtype} gradient for {source}{scaled} loses more than {dtype}'s"
                f" precision explains: {figures}")
        what += _head(evidence.head, dtype)
    return what + scale + bf16


@sentence.register
def _no_copy(evidence: NoFloat32Copy, result: CheckResult) -> str:
    return (f"f computes in {evidence.dtype} even with its Keras layers in float32 and its"
            f" arguments cast (it casts to {evidence.dtype} or makes {evidence.dtype} constants"
            " itself): no float32 copy of the computation to compare its gradient with")


@sentence.register
def _value_lost(evidence: ValueLost, result: CheckResult) -> str:
    dtype = evidence.dtype
    said = (f"f computes {evidence.value:.6g} in {dtype} where the same computation in float32"
            f" gives {evidence.reference:.6g}, further apart than {dtype}'s precision explains")
    if evidence.head is not None:
        return said + _head(evidence.head, dtype) + "; its gradients are not compared"
    return (f"{said}: an intermediate value overflows or underflows in {dtype} (a sum of"
            " squares, an exp, a variance); compute that layer in float32 (dtype='float32' on"
            " it under a mixed policy), or rescale its input (so its gradients are not"
            " compared)")
