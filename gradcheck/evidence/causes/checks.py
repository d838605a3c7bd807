"""The facts of causes the checks name, and their words: a kink, compiled VJPs, forward mode,
second derivatives, nondeterminism, an unused layer, a variable created in call."""

from __future__ import annotations

import dataclasses
from typing import Any

from gradcheck.evidence.causes.base import Facts, WhatAndFix
from gradcheck.evidence.causes.mistakes import Mistake
from gradcheck.evidence.location import Location
from gradcheck.spelling import format_index

UNTRACEABLE_FIX = ("create variables once, outside f (or in a Keras layer's build); keep tensors"
                   " in TensorFlow (no .numpy(), float() or Python `if` on tensor values)")
NO_FORWARD_RULE = ("tf.autodiff.ForwardAccumulator gives no tangent through it, so forward"
                   " mode says 0 where reverse mode does not")
FORWARD_FIX = ("a gap in TensorFlow, not in your gradient: reverse mode (what training uses) is"
               " checked by the other checks; for JVPs through it, use two reverse passes"
               " (the transpose of tape.gradient) instead of ForwardAccumulator")
SECOND_ORDER_FIX = (
    "write grad_fn in TensorFlow ops of x and upstream (no .numpy(), NumPy, tf.Variable or"
    " tf.stop_gradient), or nest a tf.custom_gradient for the second order")
SECOND_ORDER = {
    Mistake.ASYMMETRIC: "has a second derivative that is not symmetric (a second derivative of"
                        " a twice-differentiable f is)",
    Mistake.SECOND_ORDER_NONE: "is not differentiable (the gradient of its result is None)",
    Mistake.SECOND_ORDER_RAISED: "raises when differentiated again",
    Mistake.WRONG_SHAPE: "has a second derivative of the wrong shape",
}
# Ops whose kink is a tie among the elements they pick an extreme of (reductions, pooling).
_EXTREMES = {"Max": "maximum", "MaxPool": "maximum", "Min": "minimum"}
_SPECTRA = {"SelfAdjointEigV2": "eigenvalues", "Svd": "singular values"}


def spectrum_of(name: str) -> str | None:
    """What a decomposition's values are called (eigenvalues), for an op that is one."""
    return _SPECTRA.get(name.split(" ", 1)[0])


def kink_place(tie: bool, name: str = "") -> str:
    """Where an op's kink is: where its two inputs tie (Maximum, a comparison), where two of
    the elements it reduces tie for their maximum (reduce_max, MaxPool), or at 0."""
    extreme = _EXTREMES.get(name.split(" ", 1)[0])
    spectrum = spectrum_of(name)
    if tie and spectrum is not None:
        return f"where two of its {spectrum} coincide"
    if tie and extreme is not None:
        return f"where two of the elements it reduces tie for the {extreme}"
    return "where its two inputs tie" if tie else "at 0"


@dataclasses.dataclass(frozen=True)
class Kinked(Facts):
    """The op `name` that has the kink: where two inputs tie (`tie`), or at 0."""

    name: str
    tie: bool

    def words(self, mistake: Mistake) -> WhatAndFix:
        return f"{self.name} {kink_place(self.tie, self.name)}", None


@dataclasses.dataclass(frozen=True)
class Compiled(Facts):
    """A VJP under `mode` against the eager one (`eagerly`: the eager side is the odd one)."""

    mode: str
    eagerly: bool = False

    def words(self, mistake: Mistake) -> WhatAndFix:
        mode = self.mode
        if mistake == Mistake.COMPILED_VALUES:
            return f"f's values differ under {mode}", None
        if mistake == Mistake.COMPILED_NON_FINITE:
            return f"{mode} gives non-finite values", None
        if mistake == Mistake.COMPILED_NONE:
            return ("None eagerly, not under " if self.eagerly else "None under ") + mode, None
        return f"{mode} differs from eager", None


@dataclasses.dataclass(frozen=True)
class GraphGradientRaised:
    """TensorFlow's own gradient of the op type `op` (`function` in TensorFlow's `module`)
    raised while tf.function traced f's gradient, under no line of f; `location`: the line of f
    that made that op, when its trace recorded one."""

    op: str
    module: str
    function: str
    location: Location | None = None

    def fix(self, error: str | None) -> str:
        if self.op in ("If", "StatelessIf") and "Tensor.graph is undefined" in str(error):
            return ("TensorFlow's gradient of a tf.cond fails so when a tf.custom_gradient"
                    " inside it has a grad_fn reading a tf.Variable (tensorflow/tensorflow"
                    "#50170): read the variable in the decorated function (`w_value ="
                    " tf.convert_to_tensor(w)`) and use that tensor in grad_fn")
        return (f"a limitation of TensorFlow's graph-mode gradient of {self.op}, not a line of"
                " f: the eager gradient is what the other checks verify; under tf.function,"
                f" keep {self.op} out of the differentiated path or take this gradient eagerly")


@dataclasses.dataclass(frozen=True)
class NotCompiled(Facts):
    """Tracing or compiling failed: TensorFlow's `error` (first line), or the `ops` XLA has no
    kernel for; `gradient` when TensorFlow's own gradient of an op raised it."""

    error: str | None = None
    ops: str | None = None
    gradient: GraphGradientRaised | None = None

    def words(self, mistake: Mistake) -> WhatAndFix:
        said = self.error if self.ops is None else f"XLA has no kernel for {self.ops}"
        if mistake != Mistake.UNTRACEABLE:
            return str(said), None
        if self.gradient is not None:
            raised = self.gradient
            return (f"TensorFlow's gradient of {raised.op} ({raised.module}.{raised.function})"
                    f" raised {str(said).rstrip('.')}", self.gradient.fix(self.error))
        return str(said), UNTRACEABLE_FIX


@dataclasses.dataclass(frozen=True)
class NoForwardRule(Facts):
    """TensorFlow has no forward-mode rule for `ops`; `missing`: the gradient it lacks, when
    forward mode raised for it."""

    ops: tuple[str, ...]
    missing: str | None = None

    def words(self, mistake: Mistake) -> WhatAndFix:
        why = (NO_FORWARD_RULE if self.missing is None else
               f"TensorFlow has no gradient for {self.missing}, which its forward mode needs")
        return (f"TensorFlow has no forward-mode rule for {', '.join(self.ops)} ({why})",
                FORWARD_FIX)


@dataclasses.dataclass(frozen=True)
class SecondOrder(Facts):
    """A wrong second derivative; `first` (a Cause) is what the first-order machinery said of
    the gradient, when it said something."""

    first: Any = None

    def words(self, mistake: Mistake) -> WhatAndFix:
        if self.first is not None:
            return f"has a second derivative that {self.first.what}", SECOND_ORDER_FIX
        return (SECOND_ORDER.get(mistake, "has a second derivative that has wrong values"),
                SECOND_ORDER_FIX)


@dataclasses.dataclass(frozen=True)
class NoSecondOrderGradient(Facts):
    """TensorFlow has no gradient for `gradient_op`, the gradient of `op`."""

    op: str
    gradient_op: str

    def words(self, mistake: Mistake) -> WhatAndFix:
        op = self.op
        return (f"TensorFlow has no gradient for {self.gradient_op}, the gradient of {op}: the"
                f" second derivative through {op} is missing (TensorFlow's missing gradient,"
                " not your code's)",
                f"compute {op} with ops that have second derivatives (e.g. for a resize:"
                " tf.nn.conv2d_transpose or tf.nn.avg_pool2d, or a tf.custom_gradient whose"
                " grad_fn is written in differentiable ops)")


@dataclasses.dataclass(frozen=True)
class OutputChanged(Facts):
    """An `output` of f changed between two calls: its structure (`output` None), its shape
    (`shapes`: then, now), or its values by up to `largest` at `index`."""

    output: str | None = None
    shapes: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    largest: float | None = None
    index: tuple[int, ...] | None = None

    def words(self, mistake: Mistake) -> WhatAndFix:
        if self.output is None:
            return "its outputs changed structure", None
        if self.shapes is not None:
            then, now = self.shapes
            return f"{self.output} changed from shape {then} to {now}", None
        at = f" at {format_index(self.index)}" if self.index else ""
        fix = ("make f compute the same values whether or not a GradientTape watches its"
               " inputs (a library's sampler may take another path under a tape: to check the"
               " rest of f, pass the sample in as an input)"
               ) if mistake is Mistake.TAPE_DEPENDENT else None
        return f"{self.output} differs by up to {self.largest:.3g}{at}", fix


@dataclasses.dataclass(frozen=True)
class UnusedLayer(Facts):
    """The Keras layer `layer` is never called."""

    layer: str

    def words(self, mistake: Mistake) -> WhatAndFix:
        return f"{self.layer} is never called", None


@dataclasses.dataclass(frozen=True)
class CreatedInCall(Facts):
    """The `call` of Keras layer class `layer` creates tf.Variable(s) `variables` each call
    (they belong to a new layer of class `made` when it constructs one there)."""

    layer: str
    variables: tuple[str, ...]
    made: str | None = None

    def words(self, mistake: Mistake) -> WhatAndFix:
        names = ", ".join(self.variables)
        consequence = (" so the variable a training step updates is not the one the next call"
                       " reads (Keras: 'Gradients do not exist for variables', or a weight that"
                       " never changes)")
        if self.made is not None:
            return (f"{self.layer}.call constructs a new {self.made} layer, and with it new"
                    f" tf.Variables ({names}), every time it is called,{consequence}",
                    f"construct the {self.made} layer(s) once, in {self.layer}.__init__"
                    " (self.… = ...), and only call them in call")
        return (f"{self.layer}.call creates a new tf.Variable ({names}) every time it is"
                f" called,{consequence}",
                f"create it once, in {self.layer}.build (or __init__) with self.add_weight,"
                " and only read it in call")
