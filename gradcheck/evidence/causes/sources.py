"""Where a non-finite value's cause lies when it is not the op that broke: a batch feature out
of scale, an infinite fill or mask, a hyperparameter, the previous update; and the
fixes tried on the step (whether each made the gradient finite). Facts and their words."""

from __future__ import annotations

import dataclasses
import enum

from gradcheck.evidence.location import Location


class Change(enum.Enum):
    """A fix applied to the failing step without the user's code."""

    STANDARDISED = "the features of {subject} standardised"
    FINITE_FILL = "the fill -1e9 instead of {value:g}"
    FINITE_MASK = "{subject}'s infinities replaced by ±1e9"
    FINITE_LOG_MASK = "log(mask)'s -inf made -1e9"
    CLIPPED_BASE = "the base clipped to {value:.3g}"
    BOUNDED_ACTIVATION = "tanh as {subject}'s activation"
    LARGER_EPSILON = "the previous update recomputed with epsilon={value:g}"
    SMALLER_RATE = "the previous update recomputed with learning_rate={value:g}"
    SWAPPED_ARGUMENTS = "the loss called with its arguments swapped"


@dataclasses.dataclass(frozen=True)
class Trial:
    """One fix (`change`, of `subject` or with `value`) applied to the failing step, and whether
    the step's loss and gradient (`loss_only`: the loss) became finite."""

    change: Change
    repaired: bool = False
    largest: float | None = None  # the largest |gradient| after the change, when finite
    subject: str = ""
    value: float = 0.0
    loss_only: bool = False

    def words(self) -> str:
        change = "with " + self.change.value.format(subject=self.subject, value=self.value)
        judged = "loss" if self.loss_only else "gradient"
        if not self.repaired:
            return f"{change}, this step's {judged} is still not finite"
        largest = f" (largest |g| {self.largest:.3g})" if self.largest is not None else ""
        return f"{change}, this step's {judged} is finite{largest}"


def _set_by(names: tuple[tuple[str, float], ...]) -> str:
    return ", ".join(f"{name}={value:g}" for name, value in names)


def _range(low: float, high: float) -> str:
    return f"{low:.3g} .. {high:.3g}"


@dataclasses.dataclass(frozen=True)
class Source:
    """The base of a source: `chain` (how the value got from it to the op), `fix` for the
    source, and the `trials` made on the step."""

    trials: tuple[Trial, ...] = ()
    at: Location | None = None  # the source's line in the user's code, when it has one

    def chain(self) -> str:
        raise NotImplementedError

    def fix(self) -> str:
        raise NotImplementedError

    @property
    def location(self) -> Location | None:
        return self.at

    @property
    def repaired(self) -> Trial | None:
        return next((t for t in self.trials if t.repaired), None)

    def tried(self) -> str:
        """What the trials showed: the repair, else that none worked or none could be made."""
        repaired = self.repaired
        if repaired is not None:
            return f"tried on the snapshot: {repaired.words()}"
        if self.trials:
            return "tried on the snapshot: " + "; ".join(t.words() for t in self.trials)
        return "no fix could be tried on the snapshot without your code"

    def with_trials(self, trials: tuple[Trial, ...]) -> Source:
        return dataclasses.replace(self, trials=trials)


@dataclasses.dataclass(frozen=True)
class UnscaledFeature(Source):
    """A feature (column) of the batch's `argument` whose values, far from unit scale (or past
    the computing dtype's largest value), make the op's argument huge."""

    argument: str = "x"
    column: int | None = None
    low: float = 0.0
    high: float = 0.0
    others: float = 0.0  # the largest |value| of the other features
    sample: int | None = None  # the batch row of the first non-finite value
    dtype: str = "float32"
    dtype_max: float = 0.0
    layer: str = ""  # the layer that casts it, when the overflow is that cast's
    unscaled: int = 1  # how many of the `features` are far from unit scale
    features: int = 1

    def chain(self) -> str:
        column = f"feature {self.column} of {self.argument}" if self.column is not None \
            else self.argument
        sample = f" (sample {self.sample} of the batch)" if self.sample is not None else ""
        beyond = max(abs(self.low), abs(self.high)) > self.dtype_max > 0
        if beyond:
            cast = f" where {self.layer} casts it to {self.dtype}" if self.layer else ""
            return (f"it comes from the batch: {column} ranges {_range(self.low, self.high)}"
                    f"{sample}, past {self.dtype}'s largest value {self.dtype_max:.6g}{cast}")
        if self.unscaled > 1:
            which = (f"every feature of {self.argument} is" if self.unscaled == self.features
                     else f"{self.unscaled} of {self.features} features of {self.argument} are")
            return (f"it comes from the batch: {which} unscaled:"
                    f" {column} ranges {_range(self.low, self.high)}{sample}, and the others"
                    f" reach ±{self.others:.3g}")
        return (f"it comes from the batch: {column} is unscaled, {_range(self.low, self.high)}"
                f"{sample}, while the other features are within ±{self.others:.3g}")

    def fix(self) -> str:
        if max(abs(self.low), abs(self.high)) > self.dtype_max > 0:
            layer = f" (dtype='float32' on {self.layer})" if self.layer else ""
            return (f"normalise the inputs (keras.layers.Normalization, or (x - mean) / std per"
                    f" feature) before they reach the model, or keep that layer in float32"
                    f"{layer}; clamping the op would train on inf-clipped data")
        return ("standardise the features (keras.layers.Normalization adapted to the training"
                " data, or (x - mean) / std per feature); clamping the op would hide the"
                " unscaled input")


@dataclasses.dataclass(frozen=True)
class InfiniteFill(Source):
    """An infinite constant written in the user's code (a mask's fill) that the op turns into
    NaN where it fills a whole row (every element masked)."""

    value: float = float("-inf")
    sample: int | None = None

    def chain(self) -> str:
        at = f" at {self.at}" if self.at else ""
        sample = f" sample {self.sample} of the batch has" if self.sample is not None else \
            " a row has"
        return (f"its source is the {self.value:g} fill{at}:{sample} every element filled, and"
                f" a softmax (or max-subtracting op) of a row of {self.value:g} is NaN, as is"
                " 0 × inf in the gradient")

    def fix(self) -> str:
        return ("fill with a large finite negative value instead of -inf (-1e9, or"
                " scores.dtype.min / 2 under float16), so a fully masked row gives uniform"
                " weights that the mask then zeroes")


@dataclasses.dataclass(frozen=True)
class LogOfMask(Source):
    """log(mask) of a 0/1 mask, an additive mask whose masked entries are -inf: a sample whose
    whole row is masked is all -inf, and a softmax of it NaN."""

    sample: int | None = None

    def chain(self) -> str:
        at = f" at {self.at}" if self.at else ""
        row = f"sample {self.sample} of the batch has" if self.sample is not None else "a row has"
        return (f"its argument is a 0/1 mask: log(mask){at} makes an additive mask whose masked"
                f" entries are -inf, and {row} every entry masked, so its softmax is NaN")

    def fix(self) -> str:
        return ("build the additive mask finite: (mask - 1) * 1e9, tf.where(mask > 0, 0.0, -1e9),"
                " or log(mask + tiny) with a tiny that is not a denormal (1e-30 in float32)")


@dataclasses.dataclass(frozen=True)
class FractionalPower(Source):
    """x ** p with 0 < p < 1 at x = 0, whose derivative p·x^(p-1) is infinite there: the
    exponent a hyperparameter (`names` set to numbers in the same file) read at `at`."""

    exponent: float = 0.5
    names: tuple[tuple[str, float], ...] = ()

    def chain(self) -> str:
        by = f" ({_set_by(self.names)})" if self.names else ""
        return (f"its exponent {self.exponent:g}{by} is below 1, so its derivative"
                f" {self.exponent:g}·x^({self.exponent - 1:g}) is infinite where the base is 0")

    def fix(self) -> str:
        return ("clip the base away from 0 (tf.clip_by_value(base, eps, 1.0), as"
                " keras-retinanet's focal loss does), or use an exponent of at least 1")


@dataclasses.dataclass(frozen=True)
class InfiniteMask(Source):
    """A step argument that is a mask holding infinities (an intentional input, not bad data)
    multiplied or added into the computation."""

    argument: str = "mask"
    value: float = float("-inf")
    count: int = 0

    def chain(self) -> str:
        return (f"its source is the step's argument {self.argument}, a mask holding"
                f" {self.value:g} in {self.count} element(s): 0 × {self.value:g}, or a row"
                f" of {self.value:g} through a softmax, is NaN")

    def fix(self) -> str:
        return (f"give {self.argument} a large finite value (-1e9, or dtype.min / 2) instead of"
                " -inf, or mask with tf.where(mask, logits, -1e9) rather than multiplying by it")


@dataclasses.dataclass(frozen=True)
class OutsideSupport(Source):
    """A TensorFlow Probability distribution's method (`method`: log_prob, cdf, ...) given a
    value outside the distribution's support, where TFP computes the analytic continuation of
    its formula (tensorflow/probability#884): NaN or infinite, with nothing wrong in the op."""

    distribution: str = "the distribution"
    method: str = "log_prob"

    def chain(self) -> str:
        at = f" at {self.at}" if self.at else ""
        return (f"{self.distribution}.{self.method}{at} was most likely given a value outside"
                f" {self.distribution}'s support (or a parameter outside its range), where"
                " TensorFlow Probability evaluates the formula's continuation instead of"
                " raising")

    def fix(self) -> str:
        return (f"keep the values passed to {self.method} inside {self.distribution}'s support"
                f" and its parameters in range (mask or drop the others), or build"
                f" {self.distribution}(..., validate_args=True) so that the call raises there;"
                " guarding the op would hide the bad value")

    def tried(self) -> str:
        return ""  # the value is the user's data: nothing to change on their behalf


@dataclasses.dataclass(frozen=True)
class UnboundedTerm(Source):
    """A log term of the loss whose coefficient has the sign that rewards its argument going to
    0: the loss is unbounded below, and training drives it there. `names`: the hyperparameters
    (name, value) read on the coefficient's line `at`."""

    names: tuple[tuple[str, float], ...] = ()

    def chain(self) -> str:
        by = f", set by {_set_by(self.names)}" if self.names else ""
        at = f" at {self.at}" if self.at else ""
        return (f"the loss is unbounded below: the coefficient of this log term{at}"
                f"{by} is positive, so the loss falls without bound as its argument goes to 0,"
                " and training drives it there")

    def fix(self) -> str:
        named = " and ".join(name for name, _ in self.names) or "the term's weight"
        return (f"put {named} back in its range (a focal loss's alpha is a class weight in"
                " [0, 1], e.g. 0.25), so that every log term enters the loss with a negative"
                " sign; clamping the log would train a loss that rewards the wrong answer")


@dataclasses.dataclass(frozen=True)
class UnboundedRecurrence(Source):
    """A recurrent layer whose activation does not bound its state (relu): once its recurrent
    kernel's gain passes 1 the state grows geometrically along the sequence and overflows."""

    layer: str = ""
    kind: str = "LSTM"
    activation: str = "relu"
    def chain(self) -> str:
        at = f" built at {self.at}" if self.at else ""
        return (f"its source is the recurrent layer {self.layer} ({self.kind}{at}) with"
                f" activation={self.activation!r}, which does not bound the state it carries"
                " from step to step: it grows geometrically along the sequence until it"
                " overflows")

    def fix(self) -> str:
        return (f"use a bounded activation in {self.layer} (tanh, the recurrent layers'"
                " default), or clip the updates (clipnorm=1.0 on the optimizer) and lower the"
                " learning rate")


@dataclasses.dataclass(frozen=True)
class ScheduleSpike(Source):
    """A learning-rate schedule whose rate jumps (`ratio` times from one step to the next) at
    `step`, before the updates that diverged."""

    schedule: str = ""
    step: int = 0
    before: float = 0.0
    after: float = 0.0
    last: float = 0.0

    def chain(self) -> str:
        return (f"its source is the learning-rate schedule {self.schedule}: its rate jumps"
                f" from {self.before:.3g} at step {self.step - 1} to {self.after:.3g} at step"
                f" {self.step} ({self.after / self.before:.3g} times), and is {self.last:.3g}"
                " at the last update; the updates since the jump diverged")

    def fix(self) -> str:
        return (f"check {self.schedule}'s parameters (a decay whose final rate is above the"
                " warm-up's peak, such as min_lr > learning_rate): a rate should not rise after"
                " warm-up; clipping the op would hide the divergence")


@dataclasses.dataclass(frozen=True)
class SwappedArguments(Source):
    """The op's argument is the batch's labels (`argument`) as they are: a compiled loss written
    as loss(y_pred, y_true), which Keras calls as loss(y_true, y_pred)."""

    argument: str = "y"

    def chain(self) -> str:
        return (f"its argument is the batch's labels ({self.argument}, y_true) as they are: a"
                " Keras loss is called as loss(y_true, y_pred), so a loss written as"
                " loss(y_pred, y_true) has its arguments swapped")

    def fix(self) -> str:
        return ("swap the loss's parameters to (y_true, y_pred); clipping would only train a"
                " wrong loss")


@dataclasses.dataclass(frozen=True)
class PreviousUpdate(Source):
    """The weights the previous update moved (by up to `moved`, `ratio` times the learning rate)
    with the optimizer's `setting` too small for the weights' `dtype`."""

    optimizer: str = "Adam"
    weight: str = ""
    moved: float = 0.0
    ratio: float = 0.0
    learning_rate: float | None = None
    epsilon: float | None = None
    dtype: str = "float32"

    def chain(self) -> str:
        rate = f" (learning rate {self.learning_rate:g})" if self.learning_rate else ""
        eps = (f"; its epsilon {self.epsilon:g} is below {self.dtype}'s resolution next to"
               " sqrt(v), which underflows to 0 for small gradients, so the update divided by"
               " almost nothing") if self.epsilon is not None and self.dtype == "float16" else ""
        return (f"its source is the previous update: {self.optimizer}{rate} moved {self.weight}"
                f" by up to {self.moved:.3g}, {self.ratio:.3g} times the learning rate{eps}")

    def fix(self) -> str:
        if self.epsilon is not None and self.dtype == "float16":
            return (f"give {self.optimizer} an epsilon float16 can hold next to sqrt(v)"
                    " (epsilon=1e-4), or train with mixed precision"
                    " (keras.mixed_precision.set_global_policy('mixed_float16')), which keeps"
                    " the weights and the optimizer in float32")
        return ("lower the learning rate, or clip the updates (clipnorm=1.0 on the optimizer);"
                " clipping the op would hide the divergence")
