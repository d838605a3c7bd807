"""Evidence of the precision check: a source's gradient in float16 or bfloat16 against the
same computation in float32."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence


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


@dataclasses.dataclass(frozen=True)
class NoFloat32Copy(Evidence):
    """f still computes in `dtype` with its layers in float32 and its arguments cast: it casts
    to low precision itself, so there is no float32 copy to compare with."""

    dtype: str


@dataclasses.dataclass(frozen=True)
class ValueLost(Evidence):
    """f's value in `dtype` (`value`) is further from the float32 copy's (`reference`) than the
    low precision explains: an intermediate value overflows or underflows in `dtype` (a sum of
    squares, an exp), so the gradients are not compared."""

    dtype: str
    value: float
    reference: float
    head: FloatHead | None = None
