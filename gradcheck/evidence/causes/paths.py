"""The facts of cut gradient paths and of the ops that make values non-finite, and their
words."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence.causes.base import Facts, WhatAndFix
from gradcheck.evidence.causes.mistakes import Mistake
from gradcheck.evidence.causes.sources import Source
from gradcheck.evidence.location import Location

# What people do where an op gives no gradient (a hard count, index or threshold).
RELAX = ("for a gradient, use a smooth relaxation (a sigmoid- or softmax-weighted count, a soft"
         " rank or soft argmax, probabilities instead of hard hits), or a straight-through"
         " tf.custom_gradient (identity backward) declared with --surrogate NAME (surrogates= in"
         " the Python API)")
# TensorFlow op types as the user wrote them.
OP_NAMES = {"TopKV2": "tf.math.top_k / tf.argsort indices", "ArgMax": "tf.argmax",
            "ArgMin": "tf.argmin", "Round": "tf.round", "Floor": "tf.floor",
            "Ceil": "tf.math.ceil", "Sign": "tf.sign", "Equal": "tf.equal, ==",
            "NotEqual": "tf.not_equal, count_nonzero", "Greater": ">", "GreaterEqual": ">=",
            "Less": "<", "LessEqual": "<="}
# Templates formatted with the cut's input, op, dtype and the op's alias.
CUTS: dict[Mistake, tuple[str, str]] = {
    Mistake.VARIABLE: (
        "tf.Variable created from {input} copies its values and cuts the gradient path",
        "use the tensor itself (tf.stack / tf.identity), not a new tf.Variable"),
    Mistake.NUMPY_METHOD: (
        ".numpy() copies the value of a tensor computed from {input} out of TensorFlow, so"
        " nothing computed from it has a gradient", "keep the computation in TensorFlow ops"),
    Mistake.KERAS_PREDICT: (
        "model.predict returns NumPy arrays, computed outside the tape from {input}, so"
        " nothing computed from them has a gradient",
        "call the model itself, model(x): a tensor the tape records"),
    Mistake.NUMPY: (
        "a NumPy operation (np.*, np.asarray, float()) on a tensor computed from {input}"
        " leaves TensorFlow, so the result has no gradient", "use the tf.* equivalent"),
    Mistake.PYTHON_NUMBER: (
        "{called} turns a tensor computed from {input} into a Python number, which has"
        " no gradient", "keep it a tensor (tf.cast to a float dtype if needed)"),
    Mistake.STOP_GRADIENT: (
        "tf.stop_gradient blocks the gradient from {input} on this path",
        "remove it if the gradient should flow"),
    Mistake.INTEGER_CAST: (
        "a cast to {dtype} on the path from {input}: integers carry no gradient",
        "keep the value in a floating dtype (a deliberate quantisation: a straight-through"
        " tf.custom_gradient, declared with --surrogate NAME, surrogates= in the Python API)"),
    Mistake.NUMPY_FUNCTION: (
        "tf.numpy_function on the path from {input} has no gradient",
        "use TensorFlow ops, or tf.py_function with a tf.custom_gradient"),
    Mistake.PIECEWISE_CONSTANT: (
        "{op} on the path from {input} is piecewise constant{alias}: its gradient is zero or"
        " None", RELAX),
    Mistake.COMPARISON: (
        "{op} on the path from {input} compares values{alias}: its boolean result is"
        " piecewise constant and has no gradient", RELAX),
    Mistake.INTEGER_OUTPUT: (
        "{op} on the path from {input}{alias} returns {dtype} values (indices or counts),"
        " which are piecewise constant and carry no gradient", RELAX),
    Mistake.PYTHON_FUNCTION: (
        "tf.py_function on the path from {input} returns no gradient (its Python function"
        " computes the result outside the tape, e.g. with NumPy; TensorFlow then gives a"
        " scalar 0 or None)",
        "compute it with TensorFlow ops inside the function, or give it a tf.custom_gradient"),
    Mistake.NO_GRADIENT: (
        "{op} on the path from {input} has no registered gradient",
        "register one with tf.RegisterGradient or wrap it in tf.custom_gradient"),
    Mistake.NOT_DIFFERENTIABLE: (
        "{op} on the path from {input} is marked not differentiable", "use a differentiable op"),
    Mistake.ASSIGN: (
        "a value computed from {input} is assigned into a tf.Variable and read back: the read"
        " has no gradient to it", "use the tensor itself instead of a variable round trip"
        " (into part of a tensor: tf.tensor_scatter_nd_update, or tf.concat of the parts)"),
    Mistake.OVERWRITTEN: (
        "f assigns into {input} before it reads it: the values it assigns over do not matter"
        " to f, but tape.gradient differentiates the value read after the assignment",
        "read the variable before assigning it, or pass the value as a tensor argument (a"
        " tf.Variable holds state; assigning into it is not a differentiable step)"),
}


@dataclasses.dataclass(frozen=True)
class CutOp(Facts):
    """The gradient path from `input` is cut by the op `op` (of output dtype `dtype`)."""

    input: str
    op: str = ""
    dtype: str | None = None

    def words(self, mistake: Mistake) -> WhatAndFix:
        said, fixed = CUTS[mistake]
        alias = f" ({OP_NAMES[self.op]})" if self.op in OP_NAMES else ""
        called = f"{self.op}()" if self.op else "float()/int()"
        if mistake == Mistake.PYTHON_NUMBER and self.op.startswith("math."):
            fixed = f"use tf.{self.op} (TensorFlow's own, on tensors)"
        return said.format(input=self.input, op=self.op, dtype=self.dtype, alias=alias,
                           called=called), fixed


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
    the optimizer that made them (its class and learning rate, when known), and whether the
    model's inputs are at unit scale (None: not known; else their largest |value|, `inputs`)."""

    weight: str
    magnitude: float
    optimizer: str = ""
    learning_rate: float | None = None
    inputs_scaled: bool | None = None
    inputs: float = 0.0


# How the user wrote an op, with {v} for its (first) argument.
SPELLINGS = {"Sqrt": "tf.sqrt({v})", "Rsqrt": "tf.math.rsqrt({v})", "Log": "tf.math.log({v})",
             "Log1p": "tf.math.log1p({v})", "Exp": "tf.exp({v})", "Pow": "tf.pow({v}, p)",
             "RealDiv": "a / {v}", "Div": "a / {v}", "Reciprocal": "1.0 / {v}",
             "Xlogy": "tf.math.xlogy(a, {v})", "Acos": "tf.acos({v})", "Asin": "tf.asin({v})",
             "Atanh": "tf.atanh({v})", "Lgamma": "tf.math.lgamma({v})"}
SAFE_FIXES = {
    "Sqrt": "keep its argument away from 0 where the gradient is needed (tf.sqrt(v + eps),"
            " or tf.sqrt(tf.where(v > 0, v, 1.0)) with the result replaced where v is 0)",
    "Rsqrt": "keep its argument away from 0 (tf.math.rsqrt(v + eps))",
    "Log": "keep its argument positive (tf.math.log(tf.maximum(p, eps))), or write p·log p as"
           " tf.math.xlogy(p, p), which is 0 at p = 0",
    "Exp": "keep its argument small enough (tf.minimum(v, limit)), or compute in log space"
           " (tf.nn.softplus, tf.math.log_sigmoid, tf.math.reduce_logsumexp)",
    "RealDiv": "keep the denominator away from 0, or use tf.math.divide_no_nan",
    "Div": "keep the denominator away from 0, or use tf.math.divide_no_nan",
    "Reciprocal": "keep its argument away from 0, or use tf.math.divide_no_nan(1.0, v)",
    "Pow": "keep the base positive where the exponent is fractional or negative",
    "Acos": "keep its argument strictly inside (-1, 1), where its derivative is finite:"
            " tf.acos(tf.clip_by_value(v, -1 + eps, 1 - eps))",
    "Asin": "keep its argument strictly inside (-1, 1), where its derivative is finite:"
            " tf.asin(tf.clip_by_value(v, -1 + eps, 1 - eps))",
}


# A stable primitive for what feeds the op (before any clipping, which changes the loss).
STABLE_FIXES = {
    ("Log", "Softmax"): "compute it in log space: tf.nn.log_softmax(logits) instead of"
                        " tf.math.log(tf.nn.softmax(logits)); a cross-entropy as"
                        " tf.nn.softmax_cross_entropy_with_logits (in Keras, from_logits=True"
                        " on the layer's logits)",
    ("Log", "Sigmoid"): "compute it in log space: tf.math.log_sigmoid(z) instead of"
                        " tf.math.log(tf.sigmoid(z)), and log(1 - sigmoid(z)) as"
                        " tf.math.log_sigmoid(-z) (in Keras, BinaryCrossentropy(from_logits=True)"
                        " on the logits)",
    ("Log", "1-Sigmoid"): "compute it in log space: log(1 - sigmoid(z)) is"
                          " tf.math.log_sigmoid(-z), and log(sigmoid(z)) is"
                          " tf.math.log_sigmoid(z) (in Keras, BinaryCrossentropy(from_logits=True)"
                          " on the logits)",
    ("Log", "linear"): "its argument is a layer's linear output, which nothing keeps"
                       " positive: give that layer a sigmoid (a probability) or softplus (a"
                       " positive value) activation, or compute the loss on logits"
                       " (tf.math.log_sigmoid, from_logits=True)",
    ("Sqrt", "linear"): "its argument is a layer's linear output, which nothing keeps"
                        " positive: give that layer a softplus activation",
    ("Log", "linear-regression"): "its argument is a regression output (plus constants),"
                                  " which nothing keeps inside the log's domain: give the"
                                  " output layer an activation that keeps it there (softplus"
                                  " for a positive quantity such as a variance or a rate; relu"
                                  " for MSLE's y_pred >= 0), or use"
                                  " keras.losses.MeanSquaredLogarithmicError, which clips"
                                  " y_pred",
    ("Sqrt", "linear-regression"): "its argument is a regression output, which nothing keeps"
                                   " positive: give the output layer a softplus activation",
    ("Log", "1+Exp"): "use tf.math.softplus(v), which is log(1 + exp(v)) without overflowing",
    ("Exp", "1+Exp"): "use tf.math.softplus(v), which is log(1 + exp(v)) without overflowing",
}
LABELS = frozenset({"y", "y_true", "labels", "label", "target", "targets"})
# What feeds an op that is an op, not an argument of f (see gradcheck.forensics.non_finite).
PATTERNS = frozenset({"", "Softmax", "Sigmoid", "1+Exp", "1-Sigmoid", "linear",
                      "linear-regression"})


def _fed_fix(origin: NonFiniteOp) -> str | None:
    """The fix that follows from what feeds the op: a stable primitive, or the batch itself."""
    stable = STABLE_FIXES.get((origin.op, origin.fed_by))
    if stable is not None:
        return stable
    if origin.fed_by in LABELS:
        return (f"{origin.op}'s argument is the batch's labels ({origin.fed_by}, y_true) as they"
                " are: a Keras loss is called as loss(y_true, y_pred), so a loss written as"
                " loss(y_pred, y_true) has its arguments swapped; swap them (clipping would"
                " only train a wrong loss)")
    if origin.fed_by not in PATTERNS and not origin.backward:
        return (f"{origin.op}'s argument is {origin.fed_by} itself, unchanged (in training, the"
                f" batch's): the data is outside {origin.op}'s domain; transform or clean it"
                " before it reaches the loss")
    return None


# Ops whose local derivatives are their other arguments (or constants): finite where they are,
# so a non-finite gradient of theirs at finite arguments is an overflow of the product.
_LINEAR = frozenset({"Mul", "MatMul", "BatchMatMulV2", "Conv2D", "AddV2", "Add", "Sub",
                     "BiasAdd", "Neg", "Sum", "Mean"})


def _overflows(origin: NonFiniteOp) -> bool:
    return origin.backward and origin.op in _LINEAR and bool(origin.arguments)


# The largest finite value of the float dtypes a value overflows, smallest range first.
_RANGES = (("float16", 65504.0), ("float32", 3.4028234663852886e38))
# What a forward op's exact result is, from the arguments shown.
_EXACT = {"Mul": lambda a, b: a * b, "AddV2": lambda a, b: a + b, "Add": lambda a, b: a + b,
          "Sub": lambda a, b: a - b}


def _value_overflow(origin: NonFiniteOp) -> str | None:
    """The dtype a forward op's exact value is beyond (its value inf from finite arguments:
    the product or sum overflowed), when the arguments tell."""
    exact = _EXACT.get(origin.op)
    if origin.backward or exact is None or len(origin.arguments) != 2 \
            or not origin.produced.endswith("inf"):
        return None
    value = abs(exact(*origin.arguments))
    # Beyond float32's range it may be either; between the two, only float16 overflows.
    return next((dtype for dtype, largest in reversed(_RANGES)
                 if largest < value < float("inf")), None)


def _call(origin: NonFiniteOp) -> str:
    shown = ", ".join(f"{a:.4g}" for a in origin.arguments)
    return f"{origin.op}({shown})" if origin.arguments else origin.op


def _origin_words(origin: NonFiniteOp) -> str:
    at = f" at {origin.location}" if origin.location else ""
    if origin.op == "Placeholder":
        return "the input itself is not finite"
    if origin.op == "Const":  # a value written in the code or passed in, not an op's result
        return f"a constant{at} that holds {origin.produced}"
    if origin.second:
        kernel = f" ({origin.kernel})" if origin.kernel != origin.op else ""
        return (f"the second derivative of {origin.name}{at}: differentiating its gradient"
                f" again at {_call(origin)} gives {origin.produced}{kernel}")
    if origin.backward and origin.op == "Cast":
        return (f"the gradient of a Cast{at}: the gradient it passes back to a lower precision"
                " (float16's largest value is 65504) is beyond that range, so it turns into"
                f" {origin.produced}")
    if _overflows(origin):
        largest = max(abs(a) for a in origin.arguments)
        return (f"the gradient of {origin.name}{at} overflows: at {_call(origin)} its local"
                f" derivative is finite (up to {largest:.3g}), and the gradient coming back"
                f" times it is beyond the float range and becomes {origin.produced}")
    if origin.backward and not origin.arguments and origin.op in _LINEAR:  # a MatMul's
        return (f"the gradient of {origin.name}{at}, which overflows: from finite values it"
                f" gives {origin.produced}")
    if origin.backward:
        if origin.kernel == origin.op:  # the backward op computing the local derivative
            return (f"the gradient of {origin.name}{at}: its local derivative at"
                    f" {_call(origin)} is {origin.produced}")
        # A fused kernel (SqrtGrad) gives the upstream times the local derivative: its sign is
        # the upstream's.
        local = "infinite" if origin.produced.endswith("inf") else "not finite"
        return (f"the gradient of {origin.name}{at}: its local derivative at {_call(origin)}"
                f" is {local}, so the gradient it passes back is {origin.produced}"
                f" ({origin.kernel} in the backward pass)")
    overflowed = _value_overflow(origin)
    if overflowed is not None:
        largest = dict(_RANGES)[overflowed]
        return (f"{origin.name}{at}, which overflows: {_call(origin)} is beyond"
                f" {overflowed}'s range (its largest value is {largest:.6g}), so it becomes"
                f" {origin.produced}")
    if not origin.arguments:  # a matrix op's: its inputs are finite, its value is not
        return f"{origin.name}{at}, whose value is {origin.produced} from finite inputs"
    return f"{origin.name}{at}, whose value {_call(origin)} is {origin.produced}"


def _branch_words(origin: NonFiniteOp) -> str:
    if not origin.untaken:
        return ""
    where = f" at {origin.branch}" if origin.branch else ""
    if origin.branch_library:
        where = f" inside {origin.branch_library}" + (
            f" (called at {origin.branch})" if origin.branch else "")
    said = (f"; {origin.op} feeds a branch of the tf.where{where} that is not taken at those"
            " elements: tf.where's gradient sends zeros into that branch")
    if origin.xla:
        return (f"{said}; TensorFlow's eager gradient of {origin.op} gives 0 there, XLA's"
                " multiplies the zero by the local derivative (infinite or NaN), giving NaN:"
                " TensorFlow's (XLA's) gradient is at fault, not your code"
                " (tensorflow/tensorflow#118674)")
    return f"{said}, and zero times an infinite local gradient is NaN"


# Second derivatives: what to do when the gradient is finite and its own derivative is not.
SECOND_ORDER_FIXES = {
    "Pow": ("write whole-number powers as products (x * x, tf.square) and keep the base of"
            " fractional powers away from 0 where second derivatives are needed: TensorFlow"
            " differentiates pow(x, y)'s gradient y * pow(x, y - 1) again, which at x = 0 is"
            " 0 * inf = NaN (tensorflow/tensorflow#35011)"),
}


def _fix(origin: NonFiniteOp) -> str:
    if origin.second:
        first = SAFE_FIXES.get(origin.op, f"keep the inputs of {origin.op} inside the range"
                               " where it and its derivatives are finite")
        return SECOND_ORDER_FIXES.get(origin.op, f"{first}, where second derivatives (a Hessian)"
                                      " are needed: the gradient is finite at this point, but"
                                      " its own derivative is not")
    spelled = SPELLINGS.get(origin.op, f"{origin.op}({{v}})")
    if origin.backward and origin.op == "Cast":
        return ("keep the loss and its gradient within float16's range: no constant factor that"
                " scales the loss up, the loss computed in float32 (the model's outputs cast to"
                " float32 before it), and the loss scale left to the LossScaleOptimizer")
    if _overflows(origin):
        return ("scale the values that reach it (inputs normalised to a unit range, no large"
                " constant factor in the loss) so that the gradient times them stays in range;"
                " float64 has more headroom")
    if _value_overflow(origin) == "float16":
        return ("compute it in float32: under mixed precision give the model's last layer"
                " dtype='float32' (or cast the loss to float32) before the loss is scaled or"
                " multiplied by a large factor")
    if origin.untaken and origin.branch_library:
        called = f" (called at {origin.branch})" if origin.branch else ""
        return (f"the tf.where is inside {origin.branch_library}{called}, not in your code:"
                f" keep the inputs you pass it where {origin.op} stays finite (or compute in"
                f" float64), or report it to {origin.branch_library}")
    if origin.untaken:
        return (f"make the branch's input safe with an inner tf.where, so both branches are"
                f" finite: tf.where(c, {spelled.format(v='tf.where(c, v, safe)')}, other), with"
                " a safe value where c is False (e.g. 1.0)")
    return _fed_fix(origin) or SAFE_FIXES.get(
        origin.op, f"keep the inputs of {spelled.format(v='v')} inside the range where it and"
        " its derivative are finite")


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
    source: Source | None = None  # where the op's argument comes from, when that is the cause

    def words(self, mistake: Mistake) -> WhatAndFix:
        first = self.first
        stage = "of the backward pass " if self.gradient and first.backward else ""
        if self.order == 2:
            stage = "of the second backward pass (the gradient differentiated again) "
        branch = "" if self.source is not None and self.source.repaired else _branch_words(first)
        said = (f"the first op {stage}that turns finite values into non-finite ones is"
                f" {_origin_words(first)}{branch}")
        others = [("the gradient of " if o.backward else "") + o.op
                  + (f" at {o.location}" if o.location else "") for o in self.others]
        if others:
            said += f" (also: {', '.join(others)})"
        if self.dtype:
            said += (f"; traced in {self.dtype}, the arguments' own dtype, as f does not"
                     " trace with promoted float64 inputs")
        source = self.source
        if source is not None and source.chain():
            said += f"; {source.chain()}"
        if source is not None and (source.repaired or (source.chain() and not source.trials)):
            tried = source.tried()
            return said, f"{source.fix()} ({tried})" if tried else source.fix()
        if self.diverged is not None:
            return said + _diverged_words(self.diverged), _diverged_fix(self.diverged)
        if source is not None:
            return said + f"; {source.tried()}", _fix(first)
        return said, _fix(first)


def _diverged_words(diverged: DivergedWeight) -> str:
    return (f"; its huge argument comes from the weights: {diverged.weight} reaches"
            f" {diverged.magnitude:.3g}, driven there by the updates before this step")


def _diverged_fix(diverged: DivergedWeight) -> str:
    setting = (f" ({diverged.optimizer}, learning_rate={diverged.learning_rate:g})"
               if diverged.learning_rate is not None else "")
    clip = "clip the gradients (clipnorm=1.0 on the optimizer)"
    if diverged.inputs_scaled:
        advice = f"or {clip}"
    else:
        reach = f" (they reach ±{diverged.inputs:.3g})" if diverged.inputs_scaled is False else ""
        advice = f"{clip} or normalise the inputs{reach}"
    return (f"training diverged: lower the learning rate{setting}, {advice}; clipping this op's"
            " input would only hide the divergence")


@dataclasses.dataclass(frozen=True)
class NoNonFiniteOp(Facts):
    """No op was found that made the value non-finite (`traced`: f could be traced)."""

    traced: bool = True

    def words(self, mistake: Mistake) -> WhatAndFix:
        if not self.traced:
            return "not traceable", None
        return "no single op in the traced graph turns finite values into it", None
