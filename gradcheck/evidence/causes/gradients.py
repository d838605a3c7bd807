"""A wrong gradient's facts and their words: a grad_fn's named mistake (numerics/mistakes.py:
sign, factor, transposed J, J * u..., for the user who wrote it), and TensorFlow's own
gradient of an op, wrong at f's values."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence.causes.base import Facts, WhatAndFix
from gradcheck.evidence.causes.mistakes import Mistake
from gradcheck.evidence.causes.paths import SPELLINGS
from gradcheck.spelling import Spelled

CONJUGATE_FIX = (
    "TensorFlow's gradient for a complex z is ∂L/∂Re z + i ∂L/∂Im z, the conjugate of the"
    " holomorphic derivative: a grad_fn for a holomorphic f returns"
    " upstream * tf.math.conj(df/dz) (see docs/vjp.md)"
)
# Templates formatted with the facts' fields.
VALUES: dict[Mistake, WhatAndFix] = {
    Mistake.STRAIGHT_THROUGH: (
        "returns a nonzero gradient where the forward is locally constant (finite"
        " differences are zero): a straight-through estimator? If deliberate,"
        " declare it with --surrogate NAME (surrogates= in the Python API)", None),
    Mistake.IGNORED_UPSTREAM: (
        "ignores the upstream of {output}: that output's contribution u_kᵀJ_k is missing from"
        " the sum",
        "add the term for {output}'s upstream to the gradient grad_fn returns: one upstream"
        " argument per output, each contracted with its own Jacobian"),
    Mistake.ZEROS: ("returns zeros although the output depends on this input", None),
    Mistake.WRONG_SIGN: ("has the wrong sign: it returns -uᵀJ", None),
    Mistake.FACTOR: ("is off by a constant factor of {factor:.4g}", None),
    Mistake.CONJUGATED: (
        "returns the complex conjugate of TensorFlow's gradient (∂L/∂Re z − i ∂L/∂Im z, as"
        " 2·∂L/∂z would be)", CONJUGATE_FIX),
    Mistake.UNCONJUGATED: (
        "multiplies the upstream by df/dz where TensorFlow needs its conjugate (in real terms"
        " it returns J·u instead of uᵀJ)", CONJUGATE_FIX),
    Mistake.UNCONJUGATED_OUTPUT: (
        "multiplies the upstream by dz/dx where TensorFlow needs its conjugate (for a complex"
        " output z of a real x it returns Re(u·dz/dx) instead of Re(u·conj(dz/dx)))",
        "return tf.math.real(upstream * tf.math.conj(dz_dx)): " + CONJUGATE_FIX),
    Mistake.TRANSPOSED: (
        "uses J where Jᵀ is needed (it returns J·u instead of uᵀJ): transpose it", None),
    Mistake.SUMMED_UPSTREAM: (
        "gives every output element the same gradient row: it sums the upstream (e.g. over"
        " the batch axis, tf.reduce_sum(upstream)) or ignores it, instead of weighting each"
        " output's row by its own upstream element",
        "multiply by the upstream element by element before any reduction (upstream * dy/dx"
        " for an elementwise f, or tf.linalg.matvec(J, upstream, transpose_a=True)), never"
        " tf.reduce_sum(upstream) * ..."),
    Mistake.WRONG_VALUES: ("returns wrong values", None),
}
JACOBIAN_SHAPED = "returned a Jacobian-shaped tensor (the full J or J * upstream)"
SHAPES: dict[Mistake, WhatAndFix] = {
    Mistake.TRANSPOSED_SHAPED: ("returned a transposed-Jacobian-shaped tensor", None),
    Mistake.SCALAR: ("returned a scalar (a summed result)", None),
    Mistake.OUTPUT_SHAPED: (
        "returned a tensor shaped like the output, not like the input", None),
    Mistake.JACOBIAN_SHAPED: (JACOBIAN_SHAPED, None),
    Mistake.FULL_JACOBIAN: ("returned the full Jacobian J", None),
    Mistake.JACOBIAN_TIMES_UPSTREAM: (
        "returned J * upstream (the Jacobian scaled by u, not contracted with it)", None),
    Mistake.TRANSPOSED_TIMES_UPSTREAM: (
        "returned Jᵀ * upstream: the transposed Jacobian (entry [j, i] = ∂yᵢ/∂xⱼ) multiplied"
        " elementwise by the upstream u instead of contracted with it",
        "summed over its last axis it is uᵀJ: return tf.linalg.matvec(that matrix,"
        " upstream), i.e. tf.reduce_sum(matrix * upstream, axis=-1)"),
    Mistake.UNSUMMED_ROWS: (
        "scaled the Jacobian's rows by u but did not sum over the outputs",
        "summed over the output axes it is uᵀJ: tf.reduce_sum(rows, axis=0)"),
}


@dataclasses.dataclass(frozen=True)
class ReturnedValues(Facts):
    """A gradient's values next to the true ones (numerics/mistakes.py): the constant `factor`
    it is off by, the `output` whose upstream it ignores."""

    factor: float | None = None
    output: str | None = None

    def words(self, mistake: Mistake) -> WhatAndFix:
        said, fixed = VALUES[mistake]
        return (said.format(factor=self.factor, output=self.output),
                None if fixed is None else fixed.format(output=self.output))


@dataclasses.dataclass(frozen=True)
class ReturnedShape(Facts):
    """A wrong-shaped gradient (numerics/mistakes.py): its `shape`, None when not measured."""

    shape: tuple[int, ...] | None = None

    def words(self, mistake: Mistake) -> WhatAndFix:
        if mistake == Mistake.WRONG_SHAPE:
            return ("returned the wrong shape" if self.shape is None
                    else f"returned shape {self.shape}"), None
        return SHAPES[mistake]


@dataclasses.dataclass(frozen=True)
class UpstreamProbe(Facts):
    """A custom gradient called with two random upstreams: `ignored` when it returned the same
    gradient for both."""

    ignored: bool = False

    def words(self, mistake: Mistake) -> WhatAndFix:
        if self.ignored:
            return ("ignores its upstream: it returns the same gradient whatever upstream u it"
                    " is given", "multiply by the upstream (return upstream * dy/dx, or uᵀJ)")
        return "returns a wrong VJP for a random upstream", None


class WrongGradientReason(Spelled):
    """Why TensorFlow's own gradient of an op is wrong at f's values."""

    # Repeated indices: the value keeps the last write, the gradient reaches every one.
    DUPLICATE_INDICES = "duplicate-indices"
    # Repeated singular values or eigenvalues: the gradient divides by their differences.
    REPEATED_SPECTRUM = "repeated-spectrum"
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


# Why TensorFlow's own gradient of an op is wrong, and how to step around it, per reason.
_WRONG_TENSORFLOW_GRADIENTS: dict[WrongGradientReason, WhatAndFix] = {
    WrongGradientReason.REPEATED_SPECTRUM: (
        "TensorFlow's own gradient of {op} is undefined here: its singular values (or"
        " eigenvalues) repeat, and the gradient through its vectors divides by their"
        " differences (tensorflow/tensorflow#17476, #12853), so it comes out 0, inf or NaN;"
        " the vectors of a repeated value are not unique, so they have no gradient at this"
        " point, even where what you compute from them is smooth",
        "compute what you need without the vectors (the nearest orthogonal matrix U Vᵀ is"
        " m (mᵀm)^(-1/2), with tf.linalg.sqrtm), or keep the point away from repeated values"),
    WrongGradientReason.DUPLICATE_INDICES: (
        "TensorFlow's own gradient of {op} is wrong here: its indices repeat, so only the last"
        " write of each index reaches the output, but TensorFlow's gradient gives the upstream"
        " to every write (tensorflow/tensorflow#56961, #7397)",
        "make the indices unique before writing (keep the last write of each index, e.g. with"
        " tf.unique on the reversed indices), or sum duplicates deliberately with"
        " tf.tensor_scatter_nd_add"),
    WrongGradientReason.COMPLEX_CUSTOM_GRADIENT: (
        "TensorFlow's own gradient of {op} is wrong for complex inputs: {op} computes its"
        " gradient with a tf.custom_gradient of TensorFlow's (not yours) that leaves out the"
        " conjugate TensorFlow's complex gradients need (tensorflow/tensorflow#57357)",
        "write it out for complex inputs (x * tf.math.sigmoid(x), whose gradient TensorFlow"
        " derives op by op), or keep {op} to real inputs"),
    WrongGradientReason.BROADCAST_CUSTOM_GRADIENT: (
        "TensorFlow's own gradient of {op} has the wrong shape here: {op} computes its gradient"
        " with a tf.custom_gradient of TensorFlow's (not yours) that sums beta's gradient to a"
        " scalar and returns features' at the broadcast shape, right only for a scalar beta"
        " (tensorflow/tensorflow#127690)",
        "write it out for a tensor beta: features * tf.math.sigmoid(beta * features), whose"
        " gradient TensorFlow derives op by op"),
    WrongGradientReason.COMPLEX_GRADIENT: (
        "TensorFlow's own gradient of {called} is wrong for complex inputs ({source}): it"
        " differs from finite differences of the values TensorFlow computes, so TensorFlow is"
        " at fault, not your code; the {called}",
        "{exact}"),
    WrongGradientReason.XLA_UNTAKEN_BRANCH: (
        "TensorFlow's gradient under XLA (jit_compile=True) is at fault, not your code:"
        " tf.where sends a zero upstream into the branch it does not take at those elements,"
        " which holds {op}; TensorFlow's eager gradient of {op} gives 0 for it, XLA's multiplies"
        " the zero by {op}'s local derivative there (infinite or NaN), giving NaN"
        " (tensorflow/tensorflow#118674); the tf.where",
        "guard the branch's input with an inner tf.where, so the branch not taken is finite"
        " under XLA too: tf.where(c, {spelled}, other), with a safe value where c is False"
        " (e.g. 1.0)"),
    WrongGradientReason.XLA_UNCONJUGATED: (
        "TensorFlow's gradient under XLA (jit_compile=True) is at fault, not your code: for a"
        " complex input, XLA's kernel for the gradient of {called} leaves out the conjugate"
        " that TensorFlow's eager kernel applies, as TensorFlow's convention (∂L/∂Re z + i"
        " ∂L/∂Im z) needs, so XLA's gradient is wrong; the {called}",
        "compute it as {exact}, whose gradient XLA gets right{cut}, or keep {called} out of"
        " the function compiled with jit_compile=True"),
}
# The complex ops whose gradient XLA leaves unconjugated: as called, spelled another way whose
# gradient XLA gets right, and where that spelling is not enough.
_ON_THE_CUT = (" (off the negative real axis: where z is real and negative, tf.function's rewrite"
               " of tf.pow flips its gradient's sign too, so compute the root in real"
               " arithmetic, e.g. tf.complex(tf.sqrt(tf.maximum(a, 0.0)),"
               " tf.sqrt(tf.maximum(-a, 0.0))) for a real a)")
_XLA_EXACT = {"Sqrt": ("tf.sqrt(z)", "tf.pow(z, 0.5)", _ON_THE_CUT),
              "Rsqrt": ("tf.math.rsqrt(z)", "tf.pow(z, -0.5)", _ON_THE_CUT),
              "Reciprocal": ("tf.math.reciprocal(z)", "1 / z", ""),
              "Inv": ("tf.raw_ops.Inv(x=z)", "1 / z", "")}


# The complex ops whose registered gradient TensorFlow gets wrong: as called, where reported,
# and a spelling whose gradient TensorFlow derives right, op by op.
_COMPLEX_WRONG = {
    "MatrixDeterminant": (
        "tf.linalg.det", "tensorflow/tensorflow#49946",
        "write the determinant out for a small matrix (a * d - b * c for 2×2), or for a"
        " Hermitian positive definite one use tf.exp(tf.linalg.logdet(m))"),
    "LogMatrixDeterminant": (
        "tf.linalg.slogdet", "like tf.linalg.det's, tensorflow/tensorflow#49946",
        "use 0.5 * tf.linalg.logdet(m @ tf.linalg.adjoint(m)) for log|det m|"),
    "MatrixSquareRoot": (
        "tf.linalg.sqrtm", "measured on TF 2.21",
        "for a Hermitian matrix compute the root through tf.linalg.eigh"),
    "SquaredDifference": (
        "tf.math.squared_difference", "it assumes a real upstream; measured on TF 2.21",
        "write it out: d = x - y; tf.math.real(d * tf.math.conj(d))"),
    "Xlogy": ("tf.math.xlogy", "tensorflow/tensorflow#127713",
              "write it out: x * tf.math.log(y), with a tf.where for x == 0"),
    "Xlog1py": ("tf.math.xlog1py", "tensorflow/tensorflow#127713",
                "write it out: x * tf.math.log1p(y), with a tf.where for x == 0"),
    "Xdivy": ("tf.math.xdivy", "tensorflow/tensorflow#127713",
              "write it out: x / y, with a tf.where for x == 0"),
    "MulNoNan": ("tf.math.multiply_no_nan", "tensorflow/tensorflow#127713",
                 "write it out: x * y, with a tf.where for y == 0"),
    "Cumprod": ("tf.math.cumprod", "measured on TF 2.21",
                "compute it as tf.scan(lambda a, b: a * b, x)"),
    "UnsortedSegmentProd": ("tf.math.unsorted_segment_prod", "measured on TF 2.21",
                            "gather each segment and take tf.reduce_prod over it"),
}


@dataclasses.dataclass(frozen=True)
class TensorFlowGradientOp(Facts):
    """TensorFlow's own registered gradient of op type `op` is wrong at f's values, for
    `reason`."""

    op: str
    reason: WrongGradientReason

    def words(self, mistake: Mistake) -> WhatAndFix:
        said, fix = _WRONG_TENSORFLOW_GRADIENTS[self.reason]
        spelled = SPELLINGS.get(self.op, f"{self.op}({{v}})").format(v="tf.where(c, v, safe)")
        called, exact, cut = _XLA_EXACT.get(self.op, (self.op, self.op, ""))
        source = ""
        if self.reason == WrongGradientReason.COMPLEX_GRADIENT:
            called, source, exact = _COMPLEX_WRONG.get(
                self.op, (self.op, "", f"compute it without {self.op}"))
        named = {"op": self.op, "called": called, "exact": exact, "cut": cut, "source": source}
        return said.format(**named), fix.format(spelled=spelled, **named) if fix else fix
