"""The explanation of the output_gradients contract (Report.explain): what tape.gradient returns
for each input, with and without output_gradients, turned into plain data (J, 1ᵀJ, uᵀJ and the
mistake) that gradcheck.render.explanation_words words."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gradcheck.checks.context import CheckContext
from gradcheck.engine.recording import GradientOutcome
from gradcheck.evidence.explain import (
    Coincidence,
    Explanation,
    InputExplanation,
    Misconception,
    OffDiagonal,
    Product,
    Summary,
    TargetExplanation,
    TensorView,
)
from gradcheck.kinds.jacobian.check import JudgedInput
from gradcheck.kinds.vjp.evidence import VjpSymmetric
from gradcheck.numerics import judging
from gradcheck.numerics.symmetric import symmetrise
from gradcheck.report import CheckResult, Kind, Status

# Tensors up to this many elements are shown in full; larger ones by shape and a summary.
SHOWN_SIZE = 64
# Off-diagonal Jacobian entries below this fraction of the largest entry count as zero.
DIAGONAL_RTOL = 1e-8

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
    complex_parts: bool = False  # x and y complex: every array holds (real, imaginary) parts


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


def _dims(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(d) for d in shape)


def _times_upstream(target: TargetFacts, plain: np.ndarray) -> np.ndarray:
    """tape.gradient(y, x) * u as TensorFlow multiplies them (complex numbers for complex
    x and y, not their parts one by one)."""
    if not target.complex_parts:
        return np.asarray(plain * target.upstream, dtype=np.float64)
    upstream = target.upstream
    product = (plain[..., 0] + 1j * plain[..., 1]) * (upstream[..., 0] + 1j * upstream[..., 1])
    return np.stack([product.real, product.imag], axis=-1)


def _misconception(target: TargetFacts, x_name: str, x_shape: tuple[int, ...]
                   ) -> Misconception:
    """`gradient * u` for the target, next to uᵀJ."""
    plain, upstream, vjp, y_name = target.plain, target.upstream, target.vjp, target.name
    if plain is None:
        return Misconception(False, Product.NO_PATH, x_name, y_name)
    missing = functools.partial(Misconception, False, input=x_name, output=y_name,
                                gradient_shape=_dims(plain.shape),
                                upstream_shape=_dims(upstream.shape), input_shape=_dims(x_shape))
    try:
        product_shape = _dims(np.broadcast_shapes(tuple(plain.shape), tuple(upstream.shape)))
    except ValueError:
        return missing(Product.NOT_BROADCASTABLE)
    if product_shape != tuple(x_shape):
        return missing(Product.WRONG_SHAPE, shape=product_shape)
    return _compared(_times_upstream(target, plain), vjp, x_name, y_name)


def _compared(product: np.ndarray, vjp: np.ndarray | None, x_name: str,
              y_name: str | None) -> Misconception:
    """A product that can be formed, against uᵀJ."""
    difference = None if vjp is None or vjp.shape != product.shape else product - vjp
    largest = None if difference is None else float(np.max(np.abs(difference), initial=0.0))
    return Misconception(True, Product.FORMED, x_name, y_name, _dims(product.shape),
                         tensor_view(product), tensor_view(difference), largest)


def _off_diagonal(target: TargetFacts, x_shape: tuple[int, ...]) -> OffDiagonal:
    """J's largest off-diagonal entry (the first entry when none stands out)."""
    assert target.jacobian is not None
    row, col = off_diagonal_entry(target.jacobian, target.shape, x_shape) or (0, 0)
    flat = np.asarray(target.jacobian, dtype=np.float64).reshape(
        int(np.prod(target.shape, dtype=np.int64)), -1)
    return OffDiagonal(_index(row, target.shape), _index(col, x_shape), float(flat[row, col]))


def _index(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, tuple(shape))) if shape else ()


def _complex_diagonal(target: TargetFacts) -> bool:
    """Whether each complex y_i depends on x_i alone, holomorphically (its parts' 2×2 block is
    [[a, -b], [b, a]]): then gradient(y, x) * u is uᵀJ for every complex u, as for tf.exp."""
    assert target.jacobian is not None
    n = int(np.prod(target.shape[:-1], dtype=np.int64))
    blocks = np.array(target.jacobian, dtype=np.float64).reshape(n, 2, n, 2)  # a copy
    diagonal = blocks[np.arange(n), :, np.arange(n), :]  # (n, 2, 2)
    scale = float(np.max(np.abs(blocks), initial=0.0)) * DIAGONAL_RTOL
    blocks[np.arange(n), :, np.arange(n), :] = 0.0
    return bool(np.all(np.abs(blocks) <= scale)
                and np.all(np.abs(diagonal[:, 0, 0] - diagonal[:, 1, 1]) <= scale)
                and np.all(np.abs(diagonal[:, 0, 1] + diagonal[:, 1, 0]) <= scale))


def _diagonal(target: TargetFacts, x_shape: tuple[int, ...]) -> bool:
    """Whether each element of y depends on the same element of x alone (for complex x and
    y, holomorphically), so that gradient(y, x) * u is uᵀJ for every u."""
    assert target.jacobian is not None
    if tuple(target.shape) != tuple(x_shape):
        return False
    if target.complex_parts:
        return _complex_diagonal(target)
    return off_diagonal_entry(target.jacobian, target.shape, x_shape) is None


def _coincidence(target: TargetFacts, x_shape: tuple[int, ...],
                 misconception: Misconception) -> Coincidence:
    """Does gradient(y, x) * u equal uᵀJ for this target, and why."""
    if target.jacobian is None:
        return Coincidence.NO_PATH
    if target.plain is not None and tuple(target.plain.shape) != tuple(x_shape):
        return Coincidence.BROKEN_SHAPE
    if not np.any(target.jacobian):
        return Coincidence.ZERO
    if _diagonal(target, x_shape):
        return Coincidence.DIAGONAL
    if misconception.compatible and int(np.prod(target.shape, dtype=np.int64)) == 1:
        return Coincidence.SINGLE_ELEMENT
    if not misconception.compatible:
        return Coincidence.MISSHAPEN
    difference = misconception.max_abs_difference
    scale = 0.0 if target.vjp is None else float(np.max(np.abs(target.vjp), initial=0.0))
    if difference is not None and difference > DIAGONAL_RTOL * max(scale, 1.0):
        return Coincidence.DIFFER
    return Coincidence.AGREE_HERE


def _target(target: TargetFacts, x_name: str, x_shape: tuple[int, ...]) -> TargetExplanation:
    misconception = _misconception(target, x_name, x_shape)
    coincidence = _coincidence(target, x_shape, misconception)
    off_diagonal = _off_diagonal(target, x_shape) if coincidence in (
        Coincidence.MISSHAPEN, Coincidence.DIFFER, Coincidence.AGREE_HERE) else None
    return TargetExplanation(
        output=target.name,
        output_shape=tuple(target.shape),
        jacobian=tensor_view(target.jacobian),
        jacobian_source=target.jacobian_source,
        upstream=tensor_view(target.upstream),
        plain=tensor_view(target.plain),
        vjp=tensor_view(target.vjp),
        misconception=misconception,
        diagonal=target.jacobian is not None and _diagonal(target, x_shape),
        coincidence=coincidence,
        off_diagonal=off_diagonal,
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
             ) -> tuple[TensorView | None, Misconception]:
    """The sums over targets (what one tape.gradient call over all of them returns): the sum
    of the contributions uₖᵀJₖ and the summed misconception."""
    # Targets without a path add nothing, to tape.gradient and to the product alike.
    connected = [(t, e.misconception) for t, e in zip(facts.targets, targets)
                 if t.plain is not None]
    compatible = bool(connected) and all(p.compatible for _, p in connected)
    total = _sum([_times_upstream(t, t.plain) if compatible and t.plain is not None else None
                  for t, _ in connected], facts.shape)
    contributions = _sum([t.vjp for t in facts.targets], facts.shape)
    if compatible and total is not None:
        misconception = _compared(total, facts.vjp, facts.name, None)
    else:
        misconception = Misconception(
            False, Product.NOT_FORMED, facts.name, None,
            incompatible=tuple(t.name for t, p in connected if not p.compatible))
    return tensor_view(contributions), misconception


def explain_input(facts: InputFacts) -> InputExplanation:
    """The explanation for one input: per target, then summed over all targets."""
    targets = tuple(_target(t, facts.name, facts.shape) for t in facts.targets)
    fd = _finite_difference_vjp(facts)
    error = None
    if fd is not None and facts.vjp is not None and facts.vjp.shape == fd.shape:
        error = float(np.max(np.abs(facts.vjp - fd), initial=0.0))
    contributions = targets[0].vjp if targets else None
    misconception = targets[0].misconception if targets else None
    if len(targets) > 1:
        contributions, misconception = _several(facts, targets)
    return InputExplanation(
        input=facts.name, shape=tuple(facts.shape), targets=targets,
        plain=tensor_view(facts.plain), vjp=tensor_view(facts.vjp),
        finite_difference=tensor_view(fd), finite_difference_symmetrised=facts.symmetric,
        max_abs_err=error, error=facts.error,
        fed=tuple(t.name for t in facts.targets if t.plain is not None),
        sum_of_contributions=contributions, misconception=misconception)


def explain(inputs: Sequence[InputFacts]) -> Explanation:
    """The whole explanation (Report.explain): one entry per input."""
    return Explanation(tuple(explain_input(facts) for facts in inputs))


def _error(*outcomes: GradientOutcome) -> str | None:
    return next((o.error_line for o in outcomes if o.error is not None), None)


def _target_facts(ctx: CheckContext, judged: JudgedInput) -> tuple[TargetFacts, ...]:
    slot, facts = judged.slot, []
    for u, k in zip(ctx.upstreams, ctx.diff_outputs):
        plain = ctx.recording.plain_gradient([k], slot)
        vjp = ctx.recording.gradient([k], slot, [u])
        block = judged.autodiff(k)
        source = "autodiff" if block is not None else (
            "none" if plain.value is None and plain.error is None else "finite differences")
        if source == "finite differences":
            block = judged.reference(k)
        facts.append(TargetFacts(
            ctx.outputs[k].name, ctx.outputs[k].shape, u, block, source, plain.value,
            vjp.value, judged.reference(k), _error(plain, vjp),
            slot.complex_dtype is not None and ctx.outputs[k].complex_dtype is not None))
    return tuple(facts)


def explanation(ctx: CheckContext, inputs: Sequence[tuple[JudgedInput, GradientOutcome]],
                results: Sequence[CheckResult]) -> Explanation:
    """What tape.gradient returns for each input, with and without output_gradients."""
    facts = []
    for judged, vjp in inputs:
        slot = judged.slot
        plain = ctx.recording.plain_gradient(ctx.diff_outputs, slot)
        symmetric_vjp = any(r.check == Kind.VJP and r.status == Status.WARN
                            and r.input == slot.name and isinstance(r.evidence, VjpSymmetric)
                            for r in results)
        facts.append(InputFacts(
            slot.name, slot.shape, _target_facts(ctx, judged), plain.value, vjp.value,
            _error(plain, vjp), symmetric_vjp))
    return explain(facts)
