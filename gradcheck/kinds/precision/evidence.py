"""The precision check's findings: a source's gradient in float16 or bfloat16 against the same
computation in float32, and their words."""

from __future__ import annotations

import dataclasses
import math

from gradcheck.evidence import Evidence, Finding


@dataclasses.dataclass(frozen=True)
class FloatHead:
    """The known pitfall of a low-precision head: the output layer `layer` (a `kind`) of model
    `model` computes in low precision under dtype policy `policy`, and with it alone in
    float32 f's value and gradients match the float32 computation's."""

    layer: str
    kind: str
    model: str
    policy: str


@dataclasses.dataclass(frozen=True)
class PrecisionLoss(Evidence):
    """`dtype` is f's low precision; shares of the float32 gradient's elements that underflow
    to 0 or to subnormals, and of all elements that overflow; the norm-wise error against
    float32 and what the precision explains; the power-of-two `loss_scale` that brings the
    gradient into range (None when it is all zero) and what would still underflow at it;
    whether bfloat16 would serve; `scaled`: the loss scale checked (--loss-scale)."""

    dtype: str
    underflow: float
    subnormal: float
    overflow: float
    error: float
    allowed: float
    loss_scale: float | None
    scaled_underflow: float
    bfloat16_serves: bool
    scaled: float = 1.0
    head: FloatHead | None = None

    def words(self, result: Finding) -> str:
        dtype, source = self.dtype, result.input
        scaled = f" (loss scale {self.scaled:g})" if self.scaled != 1.0 else ""
        figures = (f"{_share(self.underflow)} of its nonzero float32 elements are 0 in {dtype}"
                   f" and {_share(self.subnormal)} subnormal, {_share(self.overflow)}"
                   f" overflow; error {self.error:.2g} of the float32 gradient's norm (allowed"
                   f" {self.allowed:.2g})")
        if self.loss_scale is None:
            scale = ""
        else:
            left = (f", which still leaves {_share(self.scaled_underflow)} below {dtype}'s"
                    " smallest normal" if self.scaled_underflow else "")
            scale = (f"; a loss scale of {self.loss_scale:g} (2^"
                     f"{round(math.log2(self.loss_scale))}) brings it into"
                     f" {dtype}'s range{left} (keras.mixed_precision.LossScaleOptimizer finds one"
                     " dynamically)")
        bf16 = ("; bfloat16 (mixed_bfloat16) would keep it without a loss scale: it has float32's"
                " range, with 3 significant digits" if self.bfloat16_serves else "")
        if result.status == "pass":
            return (f"the {dtype} gradient for {source}{scaled} matches float32's within what"
                    f" {dtype} explains: {figures}")
        if result.status == "warn":
            return (f"the {dtype} gradient for {source}{scaled} matches float32's, but"
                    f" {_share(self.subnormal)} of it is subnormal in {dtype}: a gradient a few"
                    f" times smaller would underflow to 0 ({figures})" + scale + bf16)
        if self.overflow:
            first = f" (the first op that overflows: {result.location})" if result.location else ""
            what = (f"the {dtype} gradient for {source}{scaled} overflows where float32's is"
                    f" finite{first}: {figures}")
            what += _head(self.head, dtype) or (
                "; under a mixed policy the layers that can overflow (a hand-written softmax or"
                " exp, the output head, the loss) belong in float32: dtype='float32' on them, or"
                " keras.layers.Activation('softmax', dtype='float32')")
        elif self.underflow > 0:
            what = (f"the {dtype} gradient for {source}{scaled} underflows: {figures}; these"
                    " weights stop learning")
        else:
            what = (f"the {dtype} gradient for {source}{scaled} loses more than {dtype}'s"
                    f" precision explains: {figures}")
            what += _head(self.head, dtype)
        return what + scale + bf16


@dataclasses.dataclass(frozen=True)
class NoFloat32Copy(Evidence):
    """f still computes in `dtype` with its layers in float32 and its arguments cast: it casts
    to low precision itself, so there is no float32 copy to compare with."""

    dtype: str

    def words(self, result: Finding) -> str:
        return (f"f computes in {self.dtype} even with its Keras layers in float32 and its"
                f" arguments cast (it casts to {self.dtype} or makes {self.dtype} constants"
                " itself): no float32 copy of the computation to compare its gradient with")


@dataclasses.dataclass(frozen=True)
class ValueLost(Evidence):
    """f's value in `dtype` (`value`) is further from the float32 copy's (`reference`) than the
    low precision explains: an intermediate value overflows or underflows in `dtype` (a sum of
    squares, an exp), so the gradients are not compared."""

    dtype: str
    value: float
    reference: float
    head: FloatHead | None = None

    def words(self, result: Finding) -> str:
        dtype = self.dtype
        said = (f"f computes {self.value:.6g} in {dtype} where the same computation in float32"
                f" gives {self.reference:.6g}, further apart than {dtype}'s precision explains")
        if self.head is not None:
            return said + _head(self.head, dtype) + "; its gradients are not compared"
        return (f"{said}: an intermediate value overflows or underflows in {dtype} (a sum of"
                " squares, an exp, a variance); compute that layer in float32 (dtype='float32' on"
                " it under a mixed policy), or rescale its input (so its gradients are not"
                " compared)")


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
