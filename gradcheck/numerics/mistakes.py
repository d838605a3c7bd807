"""Naming a wrong gradient's mistake from its numbers: sign, factor, transposed J, J * u...
(NumPy only; the words say what a grad_fn did, for the user who wrote it)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FIX_HINT = (
    "a grad_fn receives the upstream u and must return uᵀJ with its input's shape, e.g."
    " tf.linalg.matvec(J, upstream, transpose_a=True)"
)


def _close(a: np.ndarray, b: np.ndarray, scale: float, rtol: float = 1e-6) -> bool:
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= rtol * scale + 1e-9))


CONJUGATE_FIX = (
    "TensorFlow's gradient for a complex z is ∂L/∂Re z + i ∂L/∂Im z, the conjugate of the"
    " holomorphic derivative: a grad_fn for a holomorphic f returns"
    " upstream * tf.math.conj(df/dz) (see docs/vjp.md)"
)


def value_mistake(autodiff: np.ndarray, fd: np.ndarray, out_size: int, n_outputs: int,
                  output: str, rtol: float = 1e-6, complex_input: bool = False) -> Mistake:
    """What a wrong-valued gradient does, from its Jacobian block next to the true one
    (equal to within rtol of the block's scale). A complex input's columns come in
    (real, imaginary) pairs."""
    a = np.asarray(autodiff, dtype=np.float64).reshape(out_size, -1)
    f = np.asarray(fd, dtype=np.float64).reshape(out_size, -1)
    scale = float(np.max(np.abs(f), initial=0.0)) + 1e-12
    if np.any(a) and not np.any(f):
        return Mistake("straight-through",
                       "returns a nonzero gradient where the forward is locally constant (finite"
                       " differences are zero): a straight-through estimator? If deliberate,"
                       " declare it with --surrogate")
    if not np.any(a) and np.any(f):
        if n_outputs > 1:
            return Mistake("ignored-upstream", f"ignores the upstream of {output}: that output's"
                           " contribution u_kᵀJ_k is missing from the sum",
                           f"add the term for {output}'s upstream to the gradient grad_fn"
                           " returns: one upstream argument per output, each contracted with"
                           " its own Jacobian")
        return Mistake("zeros", "returns zeros although the output depends on this input")
    if _close(a, -f, scale, rtol):
        return Mistake("wrong-sign", "has the wrong sign: it returns -uᵀJ")
    norm = float(np.sum(f * f))
    if norm > 0:
        factor = float(np.sum(a * f)) / norm
        if not np.isclose(factor, 1.0, rtol=1e-3) and _close(a, factor * f, scale, rtol):
            return Mistake("factor", f"is off by a constant factor of {factor:.4g}")
    if complex_input and _close(a, f * np.tile([1.0, -1.0], a.shape[1] // 2), scale, rtol):
        return Mistake("conjugated", "returns the complex conjugate of TensorFlow's gradient"
                       " (∂L/∂Re z − i ∂L/∂Im z, as 2·∂L/∂z would be)", CONJUGATE_FIX)
    if a.shape[0] == a.shape[1] > 1 and _close(a, f.T, scale, rtol) \
            and not _close(f, f.T, scale, rtol):  # a symmetric J cannot tell J from Jᵀ
        if complex_input:
            # Multiplying by c = p + iq is [[p, -q], [q, p]] on (real, imaginary) parts, and
            # by conj(c) its transpose.
            return Mistake("unconjugated", "multiplies the upstream by df/dz where TensorFlow"
                           " needs its conjugate (in real terms it returns J·u instead of uᵀJ)",
                           CONJUGATE_FIX)
        return Mistake("transposed", "uses J where Jᵀ is needed (it returns J·u instead of"
                       " uᵀJ): transpose it")
    if a.shape[0] > 1 and np.allclose(a, a[0]) and not _close(a, f, scale, rtol):
        return Mistake("summed-upstream",
                       "gives every output element the same gradient row: it sums the upstream"
                       " (e.g. over the batch axis, tf.reduce_sum(upstream)) or ignores it,"
                       " instead of weighting each output's row by its own upstream element",
                       "multiply by the upstream element by element before any reduction"
                       " (upstream * dy/dx for an elementwise f, or tf.linalg.matvec(J, upstream,"
                       " transpose_a=True)), never tf.reduce_sum(upstream) * ...")
    return Mistake("wrong-values", "returns wrong values")


@dataclass(frozen=True)
class Mistake:
    """A named mistake: its kind, the words for it, and the fix when one follows from it."""

    kind: str
    what: str
    fix: str | None = None


def shape_mistake(grad: np.ndarray, upstream: np.ndarray, jacobian: np.ndarray | None,
                  in_shape: tuple[int, ...], out_shape: tuple[int, ...],
                  rtol: float = 1e-6) -> Mistake:
    """Name the usual wrong-shape mistakes: J, J * u, unsummed rows, Jᵀ, a scalar; `jacobian`
    is the true one (to within rtol of its scale), or None when unknown."""
    shape = tuple(grad.shape)
    if shape == out_shape + in_shape:
        return _jacobian_shaped(grad, upstream, jacobian, in_shape, out_shape, rtol)
    if shape == in_shape + out_shape and in_shape != out_shape:
        return Mistake("transposed-shaped", "returned a transposed-Jacobian-shaped tensor")
    if shape == () and in_shape != ():
        return Mistake("scalar", "returned a scalar (a summed result)")
    if shape == out_shape:
        return Mistake("output-shaped",
                       "returned a tensor shaped like the output, not like the input")
    return Mistake("wrong-shape", f"returned shape {shape}")


def _jacobian_shaped(grad: np.ndarray, upstream: np.ndarray, jacobian: np.ndarray | None,
                     in_shape: tuple[int, ...], out_shape: tuple[int, ...],
                     rtol: float) -> Mistake:
    if jacobian is None:
        return Mistake("jacobian-shaped",
                       "returned a Jacobian-shaped tensor (the full J or J * upstream)")
    scale = float(np.max(np.abs(jacobian), initial=0.0)) + 1e-12
    scaled = scale * float(np.max(np.abs(upstream), initial=0.0))
    if _close(grad, jacobian, scale, rtol):
        return Mistake("full-jacobian", "returned the full Jacobian J")
    with np.errstate(all="ignore"):
        try:  # u broadcast over J's last axes, as `J * upstream` does
            times_upstream = _close(grad, jacobian * upstream, scaled, rtol)
        except ValueError:
            times_upstream = False
    if times_upstream:
        return Mistake("jacobian-times-upstream",
                       "returned J * upstream (the Jacobian scaled by u, not contracted with it)")
    if len(in_shape) == 1 and in_shape == out_shape and _close(
            grad, jacobian.T * upstream, scaled, rtol):
        return Mistake(
            "transposed-times-upstream",
            "returned Jᵀ * upstream: the transposed Jacobian (entry [j, i] = ∂yᵢ/∂xⱼ)"
            " multiplied elementwise by the upstream u instead of contracted with it",
            "summed over its last axis it is uᵀJ: return tf.linalg.matvec(that matrix,"
            " upstream), i.e. tf.reduce_sum(matrix * upstream, axis=-1)")
    expanded = upstream.reshape(out_shape + (1,) * len(in_shape))
    if _close(grad, expanded * jacobian, scaled, rtol):
        return Mistake(
            "unsummed-rows", "scaled the Jacobian's rows by u but did not sum over the outputs",
            "summed over the output axes it is uᵀJ: tf.reduce_sum(rows, axis=0)")
    return Mistake("jacobian-shaped",
                   "returned a Jacobian-shaped tensor (the full J or J * upstream)")
