"""The explanation of tape.gradient (Report.explain) as data: per input, per target, J, 1ᵀJ,
uᵀJ and `gradient * u` (the misconception). render/json_format.py publishes it as the JSON
report's `explain` object, field for field."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
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


@dataclasses.dataclass(frozen=True)
class Misconception:
    """`tape.gradient(y, x) * u` next to uᵀJ: whether it can be formed, and how far off it is."""

    compatible: bool
    message: str
    shape: tuple[int, ...] | None = None
    values: TensorView | None = None
    difference: TensorView | None = None
    max_abs_difference: float | None = None


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
    coincide: str  # whether gradient * u equals uᵀJ here, and why
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
    note: str | None
    sum_of_contributions: TensorView | None
    misconception: Misconception | None

    @property
    def several_targets(self) -> bool:
        return len(self.targets) > 1


@dataclasses.dataclass(frozen=True)
class Explanation:
    """The formulas (by name), then one entry per input."""

    formulas: Mapping[str, str]
    inputs: tuple[InputExplanation, ...]
