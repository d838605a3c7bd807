"""The sentences of the explanation of tape.gradient (Report.explain), made from its data: the
formulas, what `gradient * u` is, whether it equals uᵀJ, and what several targets sum."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gradcheck.evidence.explain import (
    Coincidence,
    InputExplanation,
    Misconception,
    Product,
    TargetExplanation,
    TensorView,
)

FORMULAS = {
    "jacobian": "tape.jacobian(y, x) = J, of shape y.shape + x.shape: J[i, j] = ∂yᵢ/∂xⱼ",
    "plain": "tape.gradient(y, x) = 1ᵀJ = Σᵢ ∂yᵢ/∂x: the gradient of reduce_sum(y), summed over"
             " every target, with x's shape; not the Jacobian",
    "vjp": "tape.gradient(y, x, output_gradients=u) = uᵀJ = Σᵢ uᵢ ∂yᵢ/∂x: u has y's shape, the"
           " result has x's shape",
    "targets": "several targets: tape.gradient([y1, y2], x, output_gradients=[u1, u2])"
               " = u1ᵀJ1 + u2ᵀJ2",
    "misconception": "tape.gradient(y, x) * u is not uᵀJ: the two agree only when J is diagonal"
                     " (y and x of one shape, each yᵢ depending on xᵢ alone: one-to-one"
                     " elementwise functions such as tf.sin or tf.exp) or y is a scalar",
    "custom_gradient": "tf.custom_gradient: grad_fn(u) receives u (y's shape) and must return uᵀJ,"
                       " one tensor per input, each with its input's shape, e.g."
                       " tf.linalg.matvec(J, u, transpose_a=True), not J * u",
}
# A product up to this many elements is written out in its sentence.
WRITTEN_SIZE = 8


def _shape(shape: Sequence[int] | None) -> str:
    return str(tuple(int(d) for d in shape or ()))


def _element(name: str, index: Sequence[int]) -> str:
    return f"{name}[{', '.join(str(int(i)) for i in index)}]" if index else name


def _short(view: TensorView | None) -> str:
    shape = () if view is None else tuple(view.shape)
    if view is None or view.values is None or int(np.prod(shape, dtype=np.int64)) > WRITTEN_SIZE:
        return f"a {_shape(shape)} tensor"
    return np.array2string(np.asarray(view.values, dtype=np.float64) + 0.0, separator=", ",
                           formatter={"float_kind": lambda v: f"{v:.6g}"}).replace("\n", "")


def misconception_text(wrong: Misconception) -> str:
    """What `gradient * u` is (written out when small), or why it cannot be formed."""
    x = wrong.input
    if wrong.output is None:
        label = f"Σₖ tape.gradient(yₖ, {x}) * uₖ"
    else:
        label = f"tape.gradient({wrong.output}, {x}) * u"
    gradient, upstream = _shape(wrong.gradient_shape), _shape(wrong.upstream_shape)
    if wrong.case is Product.NO_PATH:
        return f"{label}: tape.gradient returned None (no path), and None * u fails"
    if wrong.case is Product.NOT_BROADCASTABLE:
        return (f"{label} is not even shape-compatible: the gradient has {x}'s shape"
                f" {gradient}, u has shape {upstream}")
    if wrong.case is Product.WRONG_SHAPE:
        return (f"{label} is not shape-compatible with {x}: the gradient has shape {gradient},"
                f" u has shape {upstream}, their product broadcasts to {_shape(wrong.shape)};"
                f" uᵀJ has {x}'s shape {_shape(wrong.input_shape)}")
    if wrong.case is Product.NOT_FORMED:
        reason = (f"the product is not shape-compatible for {', '.join(wrong.incompatible)}"
                  if wrong.incompatible else "tape.gradient returns None for every target")
        return f"{label} cannot even be formed: {reason}"
    return f"{label} = {_short(wrong.values)}"


def coincide_text(entry: InputExplanation, target: TargetExplanation) -> str:
    """One sentence: does gradient(y, x) * u equal uᵀJ for this target, and why."""
    y, x, case = target.output, entry.input, target.coincidence
    if case is Coincidence.NO_PATH:
        return (f"{y} does not depend on {x} through TensorFlow: tape.gradient({y},"
                f" {x}) is None (not zeros), with or without output_gradients")
    if case is Coincidence.BROKEN_SHAPE:
        plain = _shape(None if target.plain is None else target.plain.shape)
        return (f"tape.gradient({y}, {x}) has shape {plain}, not"
                f" {x}'s shape {_shape(entry.shape)}: a gradient function broke the"
                f" custom_gradient contract (grad_fn(u) must return uᵀJ with its input's shape;"
                f" see grad-shape), so J here is from {target.jacobian_source}")
    if case is Coincidence.ZERO:
        return (f"J is zero at this point: tape.gradient({y}, {x}) returns zeros with or"
                f" without output_gradients")
    if case is Coincidence.DIAGONAL:
        return (f"J is diagonal (each element of {y} depends only on the same element of"
                f" {x}, as in one-to-one elementwise functions), so gradient({y}, {x})"
                f" * u equals uᵀJ here")
    if case is Coincidence.SINGLE_ELEMENT:
        return (f"{y} has a single element, so u is one number and uᵀJ = u · gradient({y},"
                f" {x}): here the product does equal uᵀJ")
    largest = target.off_diagonal
    why = ("J is not diagonal" if largest is None else
           f"J is not diagonal (e.g. ∂{_element(y, largest.output_index)}/"
           f"∂{_element(x, largest.input_index)} = {largest.value:.6g})")
    if case is Coincidence.MISSHAPEN:
        return f"{why}; gradient({y}, {x}) * u is not even the right shape for uᵀJ"
    if case is Coincidence.DIFFER:
        return (f"{why}, so gradient({y}, {x}) * u ≠ uᵀJ: they differ by up to"
                f" {target.misconception.max_abs_difference:.6g}")
    return (f"{why}: gradient({y}, {x}) * u ≠ uᵀJ in general; they agree here only because"
            " of this u (an all-ones u makes uᵀJ = 1ᵀJ; a random u tells them apart)")


def several_text(entry: InputExplanation) -> str | None:
    """With several targets, what one tape.gradient call over all of them sums."""
    if not entry.several_targets:
        return None
    fed, x = entry.fed, entry.input
    if len(fed) > 1:
        return (f"{x} feeds {len(fed)} targets ({', '.join(fed)}): tape.gradient sums"
                f" their contributions, 1ᵀJ₁ + 1ᵀJ₂ + ... without output_gradients and"
                f" u₁ᵀJ₁ + u₂ᵀJ₂ + ... with them")
    names = ", ".join(t.output for t in entry.targets)
    return (f"tape.gradient over all {len(entry.targets)} targets ({names}) sums their"
            f" contributions, but only {fed[0] if fed else 'none'} depends on {x}")
