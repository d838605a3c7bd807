"""TensorFlow's symmetric-matrix gradient convention, found by symmetric perturbations (NumPy only).

Gradients of ops on symmetric matrices (tf.linalg.cholesky and what is built on it: logdet,
cholesky_solve...) assume that the input moves only along symmetric directions and return the
symmetric part (G + Gᵀ)/2 of the gradient. The op itself reads one triangle, so an
element-by-element finite difference sees 2·g below the diagonal and 0 above it. Both are right
about symmetric perturbations; this module checks exactly that.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gradcheck.numerics import differences, judging
from gradcheck.numerics.differences import FiniteDifference
from gradcheck.numerics.judging import Comparison
from gradcheck.numerics.tolerances import Tolerance

Evaluate = Callable[[np.ndarray], Sequence[np.ndarray]]


def is_square_matrix(shape: Sequence[int]) -> bool:
    """Inputs shaped (..., n, n) with n >= 2 can carry the convention."""
    return len(shape) >= 2 and shape[-1] == shape[-2] >= 2


@dataclass(frozen=True)
class Directions:
    """The symmetric directions E_ij + E_ji (i > j) and E_ii, as flat index pairs of the input."""

    shape: tuple[int, ...]
    first: np.ndarray  # flat index of (..., i, j), i >= j
    second: np.ndarray  # flat index of (..., j, i)

    @classmethod
    def of(cls, shape: Sequence[int]) -> Directions:
        *batch, n, _ = (int(d) for d in shape)
        rows, cols = np.tril_indices(n)
        base = (np.arange(int(np.prod(batch, dtype=np.int64))) * n * n)[:, None]
        return cls(tuple(int(d) for d in shape), (base + rows * n + cols).reshape(-1),
                   (base + cols * n + rows).reshape(-1))

    @property
    def count(self) -> int:
        return int(self.first.size)

    def index(self, direction: int) -> tuple[int, ...]:
        """The (..., i, j) element (i >= j) that direction number `direction` moves."""
        return tuple(int(i) for i in np.unravel_index(int(self.first[direction]), self.shape))

    def project(self, block: np.ndarray) -> np.ndarray:
        """⟨J, E_ij + E_ji⟩ for every direction: a block out + in becomes out + (count,)."""
        size = int(np.prod(self.shape, dtype=np.int64))
        array = np.asarray(block, dtype=np.float64)
        flat = array.reshape(-1, size)
        off_diagonal = (self.first != self.second)[None, :]
        projected = flat[:, self.first] + np.where(off_diagonal, flat[:, self.second], 0.0)
        return projected.reshape(array.shape[: array.ndim - len(self.shape)] + (self.count,))

    def points(self, x: np.ndarray, h: np.ndarray, start: int, stop: int) -> np.ndarray:
        """x ± h·D, x ± 2h·D for directions start..stop, in the order numerics expects."""
        flat_x = np.asarray(x, dtype=np.float64).reshape(-1)
        count = stop - start
        points = np.tile(flat_x, (count, len(differences.STEP_FACTORS), 1))
        rows = np.arange(count)
        first, second = self.first[start:stop], self.second[start:stop]
        off_diagonal = first != second
        for k, factor in enumerate(differences.STEP_FACTORS):
            step = factor * h[start:stop]
            points[rows, k, first] += step
            points[rows[off_diagonal], k, second[off_diagonal]] += step[off_diagonal]
        return points.reshape((len(differences.STEP_FACTORS) * count, *self.shape))


def swap_last_axes(block: np.ndarray) -> np.ndarray:
    return np.swapaxes(np.asarray(block, dtype=np.float64), -1, -2)


def symmetrise(block: np.ndarray) -> np.ndarray:
    """(G + Gᵀ)/2 over the input's two matrix axes (the last two of a block)."""
    return (np.asarray(block, dtype=np.float64) + swap_last_axes(block)) / 2.0


@dataclass(frozen=True)
class SymmetricVerdict:
    """Autodiff against finite differences along the symmetric directions."""

    comparison: Comparison
    autodiff_symmetric: bool
    directions: Directions

    @property
    def convention(self) -> bool:
        """Autodiff is the symmetrised gradient: right for symmetric perturbations."""
        return self.comparison.ok and self.autodiff_symmetric

    @property
    def worst_index(self) -> tuple[int, ...] | None:
        """The worst direction as the element (..., i, j), i >= j, that it moves."""
        worst = self.comparison.worst_index
        return None if worst is None else worst[:-1] + self.directions.index(worst[-1])


class SymmetricProbe:
    """Finite differences of every output along the symmetric directions of one input, on demand."""

    def __init__(self, evaluate: Evaluate, x: np.ndarray, step: np.ndarray,
                 outputs: Sequence[tuple[str, np.ndarray, str]], chunk_points: int) -> None:
        """`outputs`: (name, value at x, dtype) of each output, in the order `evaluate` returns."""
        self.evaluate = evaluate
        self.x = np.asarray(x, dtype=np.float64)
        self.directions = Directions.of(self.x.shape)
        flat_step = np.asarray(step, dtype=np.float64).reshape(-1)
        self.step = np.maximum(flat_step[self.directions.first], flat_step[self.directions.second])
        self.names = [name for name, _, _ in outputs]
        self.centres = [np.asarray(centre, dtype=np.float64) for _, centre, _ in outputs]
        self.output_dtypes = [dtype for _, _, dtype in outputs]
        self.chunk = max(1, chunk_points // len(differences.STEP_FACTORS))
        self._fd: list[FiniteDifference] | None = None
        self.failure: str | None = None

    def finite_differences(self) -> list[FiniteDifference] | None:
        """One FD block out + (directions,) per output; None when f fails off the diagonal."""
        if self._fd is None and self.failure is None:
            parts: list[list[np.ndarray]] = [[] for _ in self.centres]
            try:
                for start in range(0, self.directions.count, self.chunk):
                    stop = min(self.directions.count, start + self.chunk)
                    values = self.evaluate(self.directions.points(self.x, self.step, start, stop))
                    for bucket, value in zip(parts, values):
                        bucket.append(np.asarray(value, dtype=np.float64))
            except Exception as exc:  # f itself failing at a perturbed point: no verdict
                self.failure = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
                return None
            self._fd = [
                differences.finite_difference(np.concatenate(bucket), centre, self.step, dtype)
                for bucket, centre, dtype in zip(parts, self.centres, self.output_dtypes)
            ]
        return self._fd

    def judge_jacobian(self, output: str, block: np.ndarray,
                       tolerance: Tolerance) -> SymmetricVerdict | None:
        """The autodiff block of one output along the symmetric directions."""
        fds = self.finite_differences()
        if fds is None:
            return None
        fd = fds[self.names.index(output)]
        return self._verdict(block, fd.jacobian, fd.error_estimate, tolerance)

    def judge_vjp(self, gradient: np.ndarray, upstreams: Sequence[np.ndarray],
                  tolerance: Tolerance) -> SymmetricVerdict | None:
        """A VJP (shape of the input) against Σₖ uₖᵀJₖ along the symmetric directions."""
        fds = self.finite_differences()
        if fds is None:
            return None
        expected = np.zeros(self.directions.count)
        estimate = np.zeros(self.directions.count)
        for u, fd in zip(upstreams, fds):
            expected = expected + judging.contract(u, fd.jacobian)
            estimate = estimate + judging.contract(np.abs(u), fd.error_estimate)
        return self._verdict(gradient, expected, estimate, tolerance)

    def _verdict(self, actual: np.ndarray, expected: np.ndarray, estimate: np.ndarray,
                 tolerance: Tolerance) -> SymmetricVerdict:
        comparison = judging.compare(self.directions.project(actual), expected, tolerance,
                                      estimate)
        # A zero gradient (a cut path's None, or rounding) is trivially symmetric, and no
        # convention's.
        symmetric = float(np.max(np.abs(actual), initial=0.0)) > tolerance.atol and \
            judging.compare(actual, swap_last_axes(actual), tolerance).ok
        return SymmetricVerdict(comparison, symmetric, self.directions)
