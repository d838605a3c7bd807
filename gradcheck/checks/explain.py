"""What tape.gradient really computes for each input, as plain data: J, 1ᵀJ, uᵀJ and the mistake."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gradcheck.evidence.explain import (
    Explanation,
    InputExplanation,
    Misconception,
    Summary,
    TargetExplanation,
    TensorView,
)
from gradcheck.numerics import judging
from gradcheck.numerics.symmetric import symmetrise

# Tensors up to this many elements are shown in full; larger ones by shape and a summary.
SHOWN_SIZE = 64
# Off-diagonal Jacobian entries below this fraction of the largest entry count as zero.
DIAGONAL_RTOL = 1e-8

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


@dataclass(frozen=True)
class TargetFacts:
    """One target y_k seen from one input x."""

    name: str
    shape: tuple[int, ...]
    upstream: np.ndarray
    jacobian: np.ndarray | None  # out + in; None when there is no path
    jacobian_source: str  # "autodiff", "finite differences" or "none"
    plain: np.ndarray | None  # tape.gradient(y_k, x)
    vjp: np.ndarray | None  # tape.gradient(y_k, x, output_gradients=u_k)
    finite_difference: np.ndarray | None = None  # out + in
    error: str | None = None  # tape.gradient raised


@dataclass(frozen=True)
class InputFacts:
    """Everything tape.gradient returned for one input x, over all targets."""

    name: str
    shape: tuple[int, ...]
    targets: tuple[TargetFacts, ...]
    plain: np.ndarray | None  # tape.gradient(ys, x)
    vjp: np.ndarray | None  # tape.gradient(ys, x, output_gradients=us)
    error: str | None = None
    symmetric: bool = False  # the vjp check found TensorFlow's symmetric-matrix convention


def tensor_view(value: np.ndarray | None) -> TensorView | None:
    """A tensor for the report: values in full when small, else its shape and a summary."""
    if value is None:
        return None
    array = np.asarray(value, dtype=np.float64)
    shape = tuple(int(d) for d in array.shape)
    if array.size <= SHOWN_SIZE:
        return TensorView(shape, (array + 0.0).tolist())  # + 0.0 turns -0.0 into 0.0
    return TensorView(shape, summary=Summary(
        min=float(np.min(array)), max=float(np.max(array)),
        max_abs=float(np.max(np.abs(array))), norm=float(np.linalg.norm(array)),
        nonzero=int(np.count_nonzero(array))))


def _shape(shape: Sequence[int]) -> str:
    return str(tuple(int(d) for d in shape))


def _element(name: str, shape: Sequence[int], flat: int) -> str:
    if not shape:
        return name
    index = np.unravel_index(flat, tuple(shape))
    return f"{name}[{', '.join(str(int(i)) for i in index)}]"


def off_diagonal_entry(jacobian: np.ndarray, out_shape: Sequence[int],
                       in_shape: Sequence[int]) -> tuple[int, int] | None:
    """The largest entry ∂y_i/∂x_j with i ≠ j (as flat indices), or None when J is diagonal."""
    n_out, n_in = int(np.prod(out_shape, dtype=np.int64)), int(np.prod(in_shape, dtype=np.int64))
    matrix = np.abs(np.asarray(jacobian, dtype=np.float64).reshape(n_out, n_in))
    threshold = DIAGONAL_RTOL * float(np.max(matrix, initial=0.0))
    if tuple(out_shape) == tuple(in_shape):
        matrix = matrix - np.diag(np.diag(matrix))
    if not np.any(matrix > threshold):
        return None
    row, col = np.unravel_index(int(np.argmax(matrix)), matrix.shape)
    return int(row), int(col)


def _misconception(plain: np.ndarray | None, upstream: np.ndarray, vjp: np.ndarray | None,
                   x_name: str, x_shape: tuple[int, ...], label: str) -> Misconception:
    """`gradient * u` next to uᵀJ; `label` is how the product is written for this row."""
    if plain is None:
        return Misconception(
            False, f"{label}: tape.gradient returned None (no path), and None * u fails")
    u_shape = tuple(upstream.shape)
    try:
        product_shape = tuple(int(d) for d in np.broadcast_shapes(tuple(plain.shape), u_shape))
    except ValueError:
        return Misconception(False, f"{label} is not even shape-compatible: the gradient has"
                                    f" {x_name}'s shape {_shape(plain.shape)}, u has shape"
                                    f" {_shape(u_shape)}")
    if product_shape != tuple(x_shape):
        return Misconception(
            False, f"{label} is not shape-compatible with {x_name}: the gradient has shape"
                   f" {_shape(plain.shape)}, u has shape {_shape(u_shape)}, their product"
                   f" broadcasts to {_shape(product_shape)}; uᵀJ has {x_name}'s shape"
                   f" {_shape(x_shape)}", shape=product_shape)
    product = np.asarray(plain * upstream, dtype=np.float64)
    return _compared(product, vjp, f"{label} = {_short(product)}")


def _compared(product: np.ndarray, vjp: np.ndarray | None, message: str) -> Misconception:
    """A product that can be formed, against uᵀJ."""
    difference = None if vjp is None or vjp.shape != product.shape else product - vjp
    largest = None if difference is None else float(np.max(np.abs(difference), initial=0.0))
    return Misconception(True, message, tuple(int(d) for d in product.shape),
                         tensor_view(product), tensor_view(difference), largest)


def _short(array: np.ndarray) -> str:
    if array.size > 8:
        return f"a {_shape(array.shape)} tensor"
    return np.array2string(np.asarray(array, dtype=np.float64) + 0.0, separator=", ",
                           formatter={"float_kind": lambda v: f"{v:.6g}"}).replace("\n", "")


def _coincide(target: TargetFacts, x_name: str, x_shape: tuple[int, ...],
              misconception: Misconception) -> str:
    """One sentence: does gradient(y, x) * u equal uᵀJ for this target, and why."""
    y = target.name
    if target.jacobian is None:
        return (f"{y} does not depend on {x_name} through TensorFlow: tape.gradient({y},"
                f" {x_name}) is None (not zeros), with or without output_gradients")
    if target.plain is not None and tuple(target.plain.shape) != tuple(x_shape):
        return (f"tape.gradient({y}, {x_name}) has shape {_shape(target.plain.shape)}, not"
                f" {x_name}'s shape {_shape(x_shape)}: a gradient function broke the"
                f" custom_gradient contract (grad_fn(u) must return uᵀJ with its input's shape;"
                f" see grad-shape), so J here is from {target.jacobian_source}")
    if not np.any(target.jacobian):
        return (f"J is zero at this point: tape.gradient({y}, {x_name}) returns zeros with or"
                f" without output_gradients")
    entry = off_diagonal_entry(target.jacobian, target.shape, x_shape)
    if entry is None and tuple(target.shape) == tuple(x_shape):
        return (f"J is diagonal (each element of {y} depends only on the same element of"
                f" {x_name}, as in one-to-one elementwise functions), so gradient({y}, {x_name})"
                f" * u equals uᵀJ here")
    if misconception.compatible and int(np.prod(target.shape, dtype=np.int64)) == 1:
        return (f"{y} has a single element, so u is one number and uᵀJ = u · gradient({y},"
                f" {x_name}): here the product does equal uᵀJ")
    row, col = entry or (0, 0)
    flat = np.asarray(target.jacobian, dtype=np.float64).reshape(
        int(np.prod(target.shape, dtype=np.int64)), -1)
    why = (f"J is not diagonal (e.g. ∂{_element(y, target.shape, row)}/"
           f"∂{_element(x_name, x_shape, col)} = {flat[row, col]:.6g})")
    if not misconception.compatible:
        return f"{why}; gradient({y}, {x_name}) * u is not even the right shape for uᵀJ"
    difference = misconception.max_abs_difference
    scale = 0.0 if target.vjp is None else float(np.max(np.abs(target.vjp), initial=0.0))
    if difference is not None and difference > DIAGONAL_RTOL * max(scale, 1.0):
        return f"{why}, so gradient({y}, {x_name}) * u ≠ uᵀJ: they differ by up to {difference:.6g}"
    return (f"{why}: gradient({y}, {x_name}) * u ≠ uᵀJ in general; they agree here only because"
            " of this u (an all-ones u makes uᵀJ = 1ᵀJ; a random u tells them apart)")


def _target(target: TargetFacts, x_name: str, x_shape: tuple[int, ...]) -> TargetExplanation:
    label = f"tape.gradient({target.name}, {x_name}) * u"
    misconception = _misconception(target.plain, target.upstream, target.vjp, x_name, x_shape,
                                   label)
    return TargetExplanation(
        output=target.name,
        output_shape=tuple(target.shape),
        jacobian=tensor_view(target.jacobian),
        jacobian_source=target.jacobian_source,
        upstream=tensor_view(target.upstream),
        plain=tensor_view(target.plain),
        vjp=tensor_view(target.vjp),
        misconception=misconception,
        diagonal=target.jacobian is not None and tuple(target.shape) == tuple(x_shape)
        and off_diagonal_entry(target.jacobian, target.shape, x_shape) is None,
        coincide=_coincide(target, x_name, x_shape, misconception),
        error=target.error,
    )


def _sum(values: Sequence[np.ndarray | None], shape: tuple[int, ...]) -> np.ndarray | None:
    present = [np.asarray(v, dtype=np.float64) for v in values if v is not None]
    if not present or any(v.shape != tuple(shape) for v in present):
        return None
    return np.sum(present, axis=0)


def _finite_difference_vjp(facts: InputFacts) -> np.ndarray | None:
    blocks = [(t.upstream, t.finite_difference) for t in facts.targets]
    if any(fd is None for _, fd in blocks):
        return None
    total = np.zeros(facts.shape)
    for u, fd in blocks:
        total = total + judging.contract(u, np.asarray(fd))
    return symmetrise(total) if facts.symmetric else total


def _several(facts: InputFacts, targets: Sequence[TargetExplanation]
             ) -> tuple[str, TensorView | None, Misconception]:
    """The sums over targets (what one tape.gradient call over all of them returns): a note,
    the sum of the contributions uₖᵀJₖ and the summed misconception."""
    names = ", ".join(t.name for t in facts.targets)
    # Targets without a path add nothing, to tape.gradient and to the product alike.
    connected = [(t, e.misconception) for t, e in zip(facts.targets, targets)
                 if t.plain is not None]
    compatible = bool(connected) and all(p.compatible for _, p in connected)
    total = _sum([t.plain * t.upstream if compatible and t.plain is not None else None
                  for t, _ in connected], facts.shape)
    contributions = _sum([t.vjp for t in facts.targets], facts.shape)
    if compatible and total is not None:
        misconception = _compared(
            total, facts.vjp, f"Σₖ tape.gradient(yₖ, {facts.name}) * uₖ = {_short(total)}")
    else:
        bad = [t.name for t, p in connected if not p.compatible]
        reason = (f"the product is not shape-compatible for {', '.join(bad)}" if bad else
                  "tape.gradient returns None for every target")
        misconception = Misconception(
            False, f"Σₖ tape.gradient(yₖ, {facts.name}) * uₖ cannot even be formed: {reason}")
    fed = [t.name for t in facts.targets if t.plain is not None]
    if len(fed) > 1:
        note = (f"{facts.name} feeds {len(fed)} targets ({', '.join(fed)}): tape.gradient sums"
                f" their contributions, 1ᵀJ₁ + 1ᵀJ₂ + ... without output_gradients and"
                f" u₁ᵀJ₁ + u₂ᵀJ₂ + ... with them")
    else:
        note = (f"tape.gradient over all {len(facts.targets)} targets ({names}) sums their"
                f" contributions, but only {fed[0] if fed else 'none'} depends on {facts.name}")
    return note, tensor_view(contributions), misconception


def explain_input(facts: InputFacts) -> InputExplanation:
    """The explanation for one input: per target, then summed over all targets."""
    targets = tuple(_target(t, facts.name, facts.shape) for t in facts.targets)
    fd = _finite_difference_vjp(facts)
    error = None
    if fd is not None and facts.vjp is not None and facts.vjp.shape == fd.shape:
        error = float(np.max(np.abs(facts.vjp - fd), initial=0.0))
    note: str | None = None
    contributions = targets[0].vjp if targets else None
    misconception = targets[0].misconception if targets else None
    if len(targets) > 1:
        note, contributions, misconception = _several(facts, targets)
    return InputExplanation(
        input=facts.name, shape=tuple(facts.shape), targets=targets,
        plain=tensor_view(facts.plain), vjp=tensor_view(facts.vjp),
        finite_difference=tensor_view(fd), finite_difference_symmetrised=facts.symmetric,
        max_abs_err=error, error=facts.error, note=note, sum_of_contributions=contributions,
        misconception=misconception)


def explain(inputs: Sequence[InputFacts]) -> Explanation:
    """The whole explanation (Report.explain): formulas, then one entry per input."""
    return Explanation(dict(FORMULAS), tuple(explain_input(facts) for facts in inputs))
