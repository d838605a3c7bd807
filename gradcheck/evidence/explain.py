"""The explanation of tape.gradient (Report.explain) as data: per input, per target, J, 1ᵀJ,
uᵀJ and `gradient * u` (the misconception), with which case each is in. Its sentences and the
formulas are made in gradcheck.render.explanation_words; render/json_format.py publishes it as
the JSON report's `explain` object."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any


@dataclasses.dataclass(frozen=True)
class Summary:
    """A tensor too large to show in full."""

    min: float
    max: float
    max_abs: float
    norm: float
    nonzero: int


@dataclasses.dataclass(frozen=True)
class TensorView:
    """A tensor for the report: `values` as nested lists when small, else a `summary`."""

    shape: tuple[int, ...]
    values: Any = None
    summary: Summary | None = None


class Product(str, enum.Enum):
    """Whether `gradient * u` can be formed, and if not why."""

    FORMED = "formed"
    NO_PATH = "no-path"  # tape.gradient returned None
    NOT_BROADCASTABLE = "not-broadcastable"  # the gradient and u do not broadcast
    WRONG_SHAPE = "wrong-shape"  # they broadcast, to a shape other than x's
    NOT_FORMED = "not-formed"  # summed over targets: some target's product cannot be formed


@dataclasses.dataclass(frozen=True)
class Misconception:
    """`tape.gradient(y, x) * u` (`output` None: summed over every target) next to uᵀJ:
    whether it can be formed, and how far off it is."""

    compatible: bool
    case: Product
    input: str
    output: str | None
    shape: tuple[int, ...] | None = None  # the product's
    values: TensorView | None = None
    difference: TensorView | None = None
    max_abs_difference: float | None = None
    gradient_shape: tuple[int, ...] | None = None
    upstream_shape: tuple[int, ...] | None = None
    input_shape: tuple[int, ...] | None = None
    incompatible: tuple[str, ...] = ()  # NOT_FORMED: the targets whose product is misshapen


class Coincidence(str, enum.Enum):
    """Whether gradient(y, x) * u equals uᵀJ for one target, and why."""

    NO_PATH = "no-path"  # tape.gradient is None
    BROKEN_SHAPE = "broken-shape"  # tape.gradient does not have x's shape (a grad_fn's doing)
    ZERO = "zero"  # J is zero
    DIAGONAL = "diagonal"
    SINGLE_ELEMENT = "single-element"  # y is one number
    MISSHAPEN = "misshapen"  # J is not diagonal and the product is not even of x's shape
    DIFFER = "differ"  # J is not diagonal, and here the two differ
    AGREE_HERE = "agree-here"  # J is not diagonal, but this u makes them agree


@dataclasses.dataclass(frozen=True)
class OffDiagonal:
    """The largest ∂y[output_index]/∂x[input_index] off J's diagonal."""

    output_index: tuple[int, ...]
    input_index: tuple[int, ...]
    value: float


@dataclasses.dataclass(frozen=True)
class TargetExplanation:
    """One target y seen from one input x."""

    output: str
    output_shape: tuple[int, ...]
    jacobian: TensorView | None
    jacobian_source: str  # "autodiff", "finite differences" or "none"
    upstream: TensorView | None
    plain: TensorView | None  # tape.gradient(y, x)
    vjp: TensorView | None  # tape.gradient(y, x, output_gradients=u)
    misconception: Misconception
    diagonal: bool
    coincidence: Coincidence  # whether gradient * u equals uᵀJ here
    off_diagonal: OffDiagonal | None = None  # why J is not diagonal
    error: str | None = None  # tape.gradient raised


@dataclasses.dataclass(frozen=True)
class InputExplanation:
    """Everything tape.gradient returns for one input, per target and over all of them."""

    input: str
    shape: tuple[int, ...]
    targets: tuple[TargetExplanation, ...]
    plain: TensorView | None  # tape.gradient(ys, x)
    vjp: TensorView | None  # tape.gradient(ys, x, output_gradients=us)
    finite_difference: TensorView | None  # uᵀJ from finite differences
    finite_difference_symmetrised: bool
    max_abs_err: float | None
    error: str | None
    # Over all targets (with one target: that target's).
    fed: tuple[str, ...]  # the targets tape.gradient returns a gradient for (not None)
    sum_of_contributions: TensorView | None
    misconception: Misconception | None

    @property
    def several_targets(self) -> bool:
        return len(self.targets) > 1


@dataclasses.dataclass(frozen=True)
class Explanation:
    """One entry per input (the renderers add the formulas)."""

    inputs: tuple[InputExplanation, ...]
