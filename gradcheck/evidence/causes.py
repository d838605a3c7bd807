"""The facts a cause's words are made of: one frozen family per kind of mistake (the core
builds them into report.Cause; gradcheck.render.causes words them)."""

from __future__ import annotations

import dataclasses
from typing import Any

from gradcheck.evidence.location import Location
from gradcheck.spelling import Spelled


@dataclasses.dataclass(frozen=True)
class Facts:
    """The base of every cause's facts."""


@dataclasses.dataclass(frozen=True)
class Words(Facts):
    """Words given as they are: a hand-built cause (renderer tests, plugins), never the core."""

    what: str
    fix: str | None = None


@dataclasses.dataclass(frozen=True)
class ReturnedValues(Facts):
    """A gradient's values next to the true ones (numerics/mistakes.py): the constant `factor`
    it is off by, the `output` whose upstream it ignores."""

    factor: float | None = None
    output: str | None = None


@dataclasses.dataclass(frozen=True)
class ReturnedShape(Facts):
    """A wrong-shaped gradient (numerics/mistakes.py): its `shape`, None when not measured."""

    shape: tuple[int, ...] | None = None


@dataclasses.dataclass(frozen=True)
class UpstreamProbe(Facts):
    """A custom gradient called with two random upstreams: `ignored` when it returned the same
    gradient for both."""

    ignored: bool = False


@dataclasses.dataclass(frozen=True)
class OnItsOwn(Facts):
    """A finding of a custom gradient's own check (`finding`, a CheckResult: this layer lies
    below the report's), told as its grad_fn's mistake; `probe` (a Cause) names what calling
    the site itself showed, when that was needed."""

    finding: Any
    probe: Any = None


@dataclasses.dataclass(frozen=True)
class ShapeOnItsOwn(Facts):
    """grad_fn returned `gradient_shape` for `input` of `input_shape`; `probe` (a Cause) names
    the wrong shape."""

    input: str | None
    gradient_shape: tuple[int, ...]
    input_shape: tuple[int, ...]
    probe: Any


@dataclasses.dataclass(frozen=True)
class ContractSlip(Facts):
    """A grad_fn contract that the custom gradient `site` broke: the counts it `returned` and
    `expected`, the `names` involved (keywords, variables), an input's `dtype` against its
    `input_dtype`, whether it `paired` (input_grads, variable_grads) and whether its call
    passed any tensor `positionally`."""

    site: str
    returned: int | None = None
    expected: int | None = None
    names: tuple[str, ...] = ()
    input: str | None = None
    dtype: str | None = None
    input_dtype: str | None = None
    paired: bool = True
    positionally: bool = True


@dataclasses.dataclass(frozen=True)
class CutOp(Facts):
    """The gradient path from `input` is cut by the op `op` (of output dtype `dtype`)."""

    input: str
    op: str = ""
    dtype: str | None = None


class WrongGradientReason(Spelled):
    """Why TensorFlow's own gradient of an op is wrong at f's values."""

    # Repeated indices: the value keeps the last write, the gradient reaches every one.
    DUPLICATE_INDICES = "duplicate-indices"
    # A TensorFlow function's own tf.custom_gradient leaves out the conjugate (tf.nn.silu).
    COMPLEX_CUSTOM_GRADIENT = "complex-custom-gradient"
    # A TensorFlow function's own tf.custom_gradient returns gradients of the wrong shape
    # where its inputs broadcast (tf.nn.silu with a tensor beta: beta's summed to a scalar).
    BROADCAST_CUSTOM_GRADIENT = "broadcast-custom-gradient"
    # The op's registered gradient is wrong for complex inputs, eagerly too.
    COMPLEX_GRADIENT = "complex-gradient"
    # XLA multiplies a tf.where's zero upstream by an infinite local derivative.
    XLA_UNTAKEN_BRANCH = "xla-untaken-branch"
    # XLA's gradient kernel leaves out the conjugate the eager one applies.
    XLA_UNCONJUGATED = "xla-unconjugated"

    @property
    def shape_only(self) -> bool:
        """The gradient's shape is wrong (a grad-shape finding), not its values."""
        return self == WrongGradientReason.BROADCAST_CUSTOM_GRADIENT

    @property
    def xla_only(self) -> bool:
        return self in (WrongGradientReason.XLA_UNTAKEN_BRANCH,
                        WrongGradientReason.XLA_UNCONJUGATED)


@dataclasses.dataclass(frozen=True)
class TensorFlowGradientOp(Facts):
    """TensorFlow's own registered gradient of op type `op` is wrong at f's values, for
    `reason`."""

    op: str
    reason: WrongGradientReason


@dataclasses.dataclass(frozen=True)
class NonFiniteOp:
    """One op that made non-finite values: `op` as the user wrote it (`name`: with the
    TensorFlow function it belongs to), its local derivative (`backward`) or its value, at the
    `arguments`; `branch`: the tf.where whose untaken branch it feeds (`untaken`), in a
    library's code when `branch_library`."""

    op: str
    name: str
    kernel: str
    location: Location | None
    backward: bool
    produced: str
    arguments: tuple[float, ...] = ()
    untaken: bool = False
    branch: Location | None = None
    branch_library: str | None = None  # the package whose code has that tf.where
    second: bool = False  # its second derivative (made differentiating the gradient)
    xla: bool = False  # the untaken branch's NaN is XLA's gradient only (eagerly finite)
    # What feeds it: Softmax, Sigmoid, "1+Exp" (a stable primitive's pattern) or f's argument.
    fed_by: str = ""


@dataclasses.dataclass(frozen=True)
class DivergedWeight:
    """A training step's weight that earlier updates drove to `magnitude` (its largest |value|),
    and the optimizer that made them (its class and learning rate, when known)."""

    weight: str
    magnitude: float
    optimizer: str = ""
    learning_rate: float | None = None


@dataclasses.dataclass(frozen=True)
class FirstNonFinite(Facts):
    """The first op that made a value non-finite (`gradient`: the value is a gradient), the
    next `others`; `dtype` the arguments' own dtype f was traced in, when not promoted."""

    first: NonFiniteOp
    others: tuple[NonFiniteOp, ...] = ()
    gradient: bool = False
    dtype: str | None = None
    order: int = 1  # 2: the value is a second derivative (the gradient itself is finite)
    diverged: DivergedWeight | None = None  # in training: the weight behind the huge argument


@dataclasses.dataclass(frozen=True)
class NoNonFiniteOp(Facts):
    """No op was found that made the value non-finite (`traced`: f could be traced)."""

    traced: bool = True


@dataclasses.dataclass(frozen=True)
class Kinked(Facts):
    """The op `name` that has the kink: where two inputs tie (`tie`), or at 0."""

    name: str
    tie: bool


@dataclasses.dataclass(frozen=True)
class Compiled(Facts):
    """A VJP under `mode` against the eager one (`eagerly`: the eager side is the odd one)."""

    mode: str
    eagerly: bool = False


@dataclasses.dataclass(frozen=True)
class NotCompiled(Facts):
    """Tracing or compiling failed: TensorFlow's `error` (first line), or the `ops` XLA has no
    kernel for."""

    error: str | None = None
    ops: str | None = None


@dataclasses.dataclass(frozen=True)
class NoForwardRule(Facts):
    """TensorFlow has no forward-mode rule for `ops`; `missing`: the gradient it lacks, when
    forward mode raised for it."""

    ops: tuple[str, ...]
    missing: str | None = None


@dataclasses.dataclass(frozen=True)
class SecondOrder(Facts):
    """A wrong second derivative; `first` (a Cause) is what the first-order machinery said of
    the gradient, when it said something."""

    first: Any = None


@dataclasses.dataclass(frozen=True)
class NoSecondOrderGradient(Facts):
    """TensorFlow has no gradient for `gradient_op`, the gradient of `op`."""

    op: str
    gradient_op: str


@dataclasses.dataclass(frozen=True)
class OutputChanged(Facts):
    """An `output` of f changed between two calls: its structure (`output` None), its shape
    (`shapes`: then, now), or its values by up to `largest` at `index`."""

    output: str | None = None
    shapes: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    largest: float | None = None
    index: tuple[int, ...] | None = None


@dataclasses.dataclass(frozen=True)
class UnusedLayer(Facts):
    """The Keras layer `layer` is never called."""

    layer: str


@dataclasses.dataclass(frozen=True)
class CreatedInCall(Facts):
    """The `call` of Keras layer class `layer` creates tf.Variable(s) `variables` each call
    (they belong to a new layer of class `made` when it constructs one there)."""

    layer: str
    variables: tuple[str, ...]
    made: str | None = None
