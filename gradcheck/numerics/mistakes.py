"""Naming a wrong gradient's mistake from its numbers: sign, factor, transposed J, J * u...
(NumPy only; the facts in gradcheck.evidence.causes word what a grad_fn did, for its author)."""

from __future__ import annotations

import numpy as np

from gradcheck.evidence.causes import ReturnedShape, ReturnedValues
from gradcheck.report import Cause, Mistake


def _close(a: np.ndarray, b: np.ndarray, scale: float, rtol: float = 1e-6) -> bool:
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= rtol * scale + 1e-9))


def _values(mistake: Mistake, factor: float | None = None, output: str | None = None) -> Cause:
    return Cause(mistake, facts=ReturnedValues(factor, output))


def value_mistake(autodiff: np.ndarray, fd: np.ndarray, out_size: int, n_outputs: int,
                  output: str, rtol: float = 1e-6, complex_input: bool = False,
                  complex_output: bool = False) -> Cause:
    """What a wrong-valued gradient does, from its Jacobian block next to the true one
    (equal to within rtol of the block's scale). A complex input's columns, and a complex
    output's rows, come in (real, imaginary) pairs."""
    a = np.asarray(autodiff, dtype=np.float64).reshape(out_size, -1)
    f = np.asarray(fd, dtype=np.float64).reshape(out_size, -1)
    scale = float(np.max(np.abs(f), initial=0.0)) + 1e-12
    if np.any(a) and not np.any(f):
        return _values(Mistake.STRAIGHT_THROUGH)
    if not np.any(a) and np.any(f):
        if n_outputs > 1:
            return _values(Mistake.IGNORED_UPSTREAM, output=output)
        return _values(Mistake.ZEROS)
    if _close(a, -f, scale, rtol):
        return _values(Mistake.WRONG_SIGN)
    norm = float(np.sum(f * f))
    if norm > 0:
        factor = float(np.sum(a * f)) / norm
        if not np.isclose(factor, 1.0, rtol=1e-3) and _close(a, factor * f, scale, rtol):
            return _values(Mistake.FACTOR, factor=factor)
    if complex_input and _close(a, f * np.tile([1.0, -1.0], a.shape[1] // 2), scale, rtol):
        return _values(Mistake.CONJUGATED)
    # Re(u·dz/dx) where TensorFlow takes Re(conj(dz/dx)·u): the imaginary rows change sign.
    if complex_output and not complex_input and _close(
            a, f * np.tile([1.0, -1.0], a.shape[0] // 2)[:, None], scale, rtol):
        return _values(Mistake.UNCONJUGATED_OUTPUT)
    if a.shape[0] == a.shape[1] > 1 and _close(a, f.T, scale, rtol) \
            and not _close(f, f.T, scale, rtol):  # a symmetric J cannot tell J from Jᵀ
        # Multiplying by c = p + iq is [[p, -q], [q, p]] on (real, imaginary) parts, and by
        # conj(c) its transpose.
        return _values(Mistake.UNCONJUGATED if complex_input else Mistake.TRANSPOSED)
    if a.shape[0] > 1 and np.allclose(a, a[0]) and not _close(a, f, scale, rtol):
        return _values(Mistake.SUMMED_UPSTREAM)
    return _values(Mistake.WRONG_VALUES)


def _shaped(mistake: Mistake, shape: tuple[int, ...] | None = None) -> Cause:
    return Cause(mistake, facts=ReturnedShape(shape))


def shape_mistake(grad: np.ndarray, upstream: np.ndarray, jacobian: np.ndarray | None,
                  in_shape: tuple[int, ...], out_shape: tuple[int, ...],
                  rtol: float = 1e-6) -> Cause:
    """Name the usual wrong-shape mistakes: J, J * u, unsummed rows, Jᵀ, a scalar; `jacobian`
    is the true one (to within rtol of its scale), or None when unknown."""
    shape = tuple(grad.shape)
    if shape == out_shape + in_shape:
        return _jacobian_shaped(grad, upstream, jacobian, in_shape, out_shape, rtol)
    if shape == in_shape + out_shape and in_shape != out_shape:
        return _shaped(Mistake.TRANSPOSED_SHAPED)
    if shape == () and in_shape != ():
        return _shaped(Mistake.SCALAR)
    if shape == out_shape:
        return _shaped(Mistake.OUTPUT_SHAPED)
    return _shaped(Mistake.WRONG_SHAPE, shape)


def _jacobian_shaped(grad: np.ndarray, upstream: np.ndarray, jacobian: np.ndarray | None,
                     in_shape: tuple[int, ...], out_shape: tuple[int, ...],
                     rtol: float) -> Cause:
    if jacobian is None:
        return _shaped(Mistake.JACOBIAN_SHAPED)
    scale = float(np.max(np.abs(jacobian), initial=0.0)) + 1e-12
    scaled = scale * float(np.max(np.abs(upstream), initial=0.0))
    if _close(grad, jacobian, scale, rtol):
        return _shaped(Mistake.FULL_JACOBIAN)
    with np.errstate(all="ignore"):
        try:  # u broadcast over J's last axes, as `J * upstream` does
            times_upstream = _close(grad, jacobian * upstream, scaled, rtol)
        except ValueError:
            times_upstream = False
    if times_upstream:
        return _shaped(Mistake.JACOBIAN_TIMES_UPSTREAM)
    if len(in_shape) == 1 and in_shape == out_shape and _close(
            grad, jacobian.T * upstream, scaled, rtol):
        return _shaped(Mistake.TRANSPOSED_TIMES_UPSTREAM)
    expanded = upstream.reshape(out_shape + (1,) * len(in_shape))
    if _close(grad, expanded * jacobian, scaled, rtol):
        return _shaped(Mistake.UNSUMMED_ROWS)
    return _shaped(Mistake.JACOBIAN_SHAPED)
