"""Functions nobody here wrote (TensorFlow, TensorFlow Probability, GPflow), each at a
well-conditioned point, for the real-world suite.

Every entry is a `Case`: a name, a category, the library, a callable f(*args) written as a
user writes it, and its float arguments at a point where f is smooth and well-conditioned
(distinct values where a max or a sort decides, SPD / symmetric matrices with distinct
eigenvalues where a decomposition needs them, parameters inside their supports). Integer data
(indices, labels, segment ids, counts) is part of f, not an argument. f is dtype-generic:
constants are built in the dtype of the arguments, so the same f runs in float32 and float64.

`validate()` checks each case once by hand, independently of gradcheck: tape.gradient
(one fresh tape per output element) against a 6th-order central difference in float64.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

DTYPES = ("float64", "float32")


@dataclass(frozen=True)
class Case:
    name: str
    category: str
    library: str
    f: Callable[..., Any]
    point: Callable[[], tuple[np.ndarray, ...]]  # float64 values of the arguments
    dtypes: tuple[str, ...] = DTYPES
    note: str = ""
    # Arguments that are symmetric matrices of which f reads one triangle (Cholesky...):
    # TensorFlow's gradient is the symmetric part, so elementwise differences do not apply.
    symmetric: tuple[int, ...] = ()
    # A genuine library defect that gradcheck rightly reports, verified by hand: the
    # (check, input) pairs it fails, (check, input, "float64") for those that show only when
    # gradcheck computes in float64, and the evidence.
    defect: tuple[tuple[str, ...], ...] = ()
    # Failures the same defect makes on some runs only (entries as in `defect`): XLA's
    # garbage that holds a NaN on some runs is also a non-finite finding then.
    defect_on_some_runs: tuple[tuple[str, ...], ...] = ()
    evidence: str = ""

    def arguments(self, dtype: str) -> tuple[np.ndarray, ...]:
        return tuple(np.asarray(a, dtype=dtype) for a in self.point())


CATALOGUE: list[Case] = []


def add(name: str, category: str, f: Callable[..., Any],
        point: Callable[[], tuple[Any, ...]], library: str = "tf", **kw: Any) -> None:
    if any(case.name == name for case in CATALOGUE):
        raise ValueError(f"duplicate case {name}")

    def values() -> tuple[np.ndarray, ...]:
        return tuple(np.asarray(v, dtype=np.float64) for v in point())

    CATALOGUE.append(Case(name, category, library, f, values, **kw))


# ----------------------------------------------------------------------------- points

def _rng(*key: Any) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def vec(n: int, lo: float, hi: float, key: Any = 0) -> np.ndarray:
    """n distinct, irregular values in [lo, hi], at least (hi - lo) / (2n) apart."""
    rng = _rng("vec", n, lo, hi, key)
    grid = lo + (hi - lo) * (np.arange(n) + 0.25 + 0.5 * rng.random(n)) / n
    return rng.permutation(grid)


def mat(shape: tuple[int, ...], lo: float, hi: float, key: Any = 0) -> np.ndarray:
    return vec(int(np.prod(shape)), lo, hi, key).reshape(shape)


def away(n: int, key: Any = 0, low: float = 0.3, high: float = 2.0) -> np.ndarray:
    """Values of both signs, |v| in [low, high]: away from the kink at 0."""
    magnitudes = vec(n, low, high, key)
    return magnitudes * np.where(np.arange(n) % 2 == 0, 1.0, -1.0)


def general(n: int, key: Any = 0) -> np.ndarray:
    """A well-conditioned non-symmetric matrix."""
    return 2.0 * np.eye(n) + 0.6 * mat((n, n), -1.0, 1.0, ("general", key))


def spd(n: int, key: Any = 0) -> np.ndarray:
    """An SPD matrix with distinct eigenvalues 1..n-ish and a random basis."""
    q, _ = np.linalg.qr(mat((n, n), -1.0, 1.0, ("spd", key)))
    eigenvalues = 1.0 + np.arange(n) * 0.9 + 0.1 * vec(n, 0.0, 1.0, key)
    a = (q * eigenvalues) @ q.T
    return 0.5 * (a + a.T)


def lower(n: int, key: Any = 0) -> np.ndarray:
    """A lower-triangular matrix with a positive diagonal (zeros above)."""
    return np.tril(mat((n, n), -0.5, 0.5, ("lower", key)), -1) + np.diag(vec(n, 1.0, 2.0, key))


def simplex(n: int, key: Any = 0) -> np.ndarray:
    v = vec(n, 0.5, 1.5, key)
    return v / v.sum()


def c(value: Any, like: Any) -> tf.Tensor:
    """A constant in the dtype of `like` (how a dtype-generic function builds constants)."""
    return tf.constant(value, dtype=like.dtype)


# ----------------------------------------------------------------------- elementwise unary

_UNARY: list[tuple[str, Callable[[Any], Any], float, float]] = [
    ("tf.math.exp", tf.math.exp, -1.5, 1.5),
    ("tf.math.log", tf.math.log, 0.4, 3.0),
    ("tf.math.log1p", tf.math.log1p, -0.5, 2.0),
    ("tf.math.expm1", tf.math.expm1, -1.5, 1.5),
    ("tf.math.sin", tf.math.sin, -2.0, 2.0),
    ("tf.math.cos", tf.math.cos, -2.0, 2.0),
    ("tf.math.tan", tf.math.tan, -1.2, 1.2),
    ("tf.math.tanh", tf.math.tanh, -2.0, 2.0),
    ("tf.math.sinh", tf.math.sinh, -2.0, 2.0),
    ("tf.math.cosh", tf.math.cosh, -2.0, 2.0),
    ("tf.math.asin", tf.math.asin, -0.8, 0.8),
    ("tf.math.acos", tf.math.acos, -0.8, 0.8),
    ("tf.math.atan", tf.math.atan, -3.0, 3.0),
    ("tf.math.asinh", tf.math.asinh, -3.0, 3.0),
    ("tf.math.acosh", tf.math.acosh, 1.3, 3.0),
    ("tf.math.atanh", tf.math.atanh, -0.8, 0.8),
    ("tf.math.sqrt", tf.math.sqrt, 0.3, 3.0),
    ("tf.math.rsqrt", tf.math.rsqrt, 0.3, 3.0),
    ("tf.math.square", tf.math.square, -2.0, 2.0),
    ("tf.math.reciprocal", tf.math.reciprocal, 0.4, 2.5),
    ("tf.math.sigmoid", tf.math.sigmoid, -3.0, 3.0),
    ("tf.math.softplus", tf.math.softplus, -3.0, 3.0),
    ("tf.math.log_sigmoid", tf.math.log_sigmoid, -3.0, 3.0),
    ("tf.math.erf", tf.math.erf, -1.5, 1.5),
    ("tf.math.erfc", tf.math.erfc, -1.5, 1.5),
    ("tf.math.erfinv", tf.math.erfinv, -0.8, 0.8),
    ("tf.math.ndtri", tf.math.ndtri, 0.1, 0.9),
    ("tf.math.lgamma", tf.math.lgamma, 0.5, 4.0),
    ("tf.math.digamma", tf.math.digamma, 0.5, 4.0),
    ("tf.math.bessel_i0e", tf.math.bessel_i0e, 0.3, 3.0),
    ("tf.math.bessel_i1e", tf.math.bessel_i1e, 0.3, 3.0),
    ("tf.math.special.bessel_j0", tf.math.special.bessel_j0, 0.3, 3.0),
    ("tf.math.special.bessel_y1", tf.math.special.bessel_y1, 0.5, 3.0),
    ("tf.math.special.bessel_k0e", tf.math.special.bessel_k0e, 0.5, 3.0),
    ("tf.math.special.dawsn", tf.math.special.dawsn, -2.0, 2.0),
    ("tf.math.special.expint", tf.math.special.expint, 0.5, 2.5),
    ("tf.math.special.fresnel_cos", tf.math.special.fresnel_cos, -1.5, 1.5),
    ("tf.math.special.spence", tf.math.special.spence, 0.3, 2.0),
    ("tf.nn.selu", tf.nn.selu, -2.0, 2.0),
    ("tf.nn.gelu", tf.nn.gelu, -2.0, 2.0),
    ("tf.nn.silu", tf.nn.silu, -2.0, 2.0),
    ("tf.nn.softsign", tf.nn.softsign, -2.0, 2.0),
]
for _name, _fn, _lo, _hi in _UNARY:
    add(_name, "elementwise", (lambda fn: lambda x: fn(x))(_fn),
        (lambda lo, hi, key: lambda: (vec(5, lo, hi, key),))(_lo, _hi, _name))

# Piecewise functions at points away from their kinks.
add("tf.math.abs", "elementwise", lambda x: tf.math.abs(x), lambda: (away(5, "abs"),))
add("tf.nn.relu", "elementwise", lambda x: tf.nn.relu(x), lambda: (away(5, "relu"),))
add("tf.nn.elu", "elementwise", lambda x: tf.nn.elu(x), lambda: (away(5, "elu"),))
add("tf.nn.leaky_relu", "elementwise", lambda x: tf.nn.leaky_relu(x, alpha=0.1),
    lambda: (away(5, "leaky"),))
add("tf.nn.relu6", "elementwise", lambda x: tf.nn.relu6(x), lambda: (vec(5, 0.5, 5.5, "r6"),))
add("tf.math.polygamma", "elementwise", lambda x: tf.math.polygamma(tf.ones_like(x), x),
    lambda: (vec(5, 0.5, 4.0, "pg"),))
add("tf.clip_by_value", "elementwise", lambda x: tf.clip_by_value(x, -1.0, 1.0) * x,
    lambda: (np.array([-1.6, -0.4, 0.3, 0.8, 1.7]),))

# ----------------------------------------------------------------------------------- binary

add("tf.math.add", "binary", lambda x, y: tf.math.add(x, y),
    lambda: (vec(4, -2, 2, "add"), vec(4, -2, 2, "add2")))
add("tf.math.subtract", "binary", lambda x, y: tf.math.subtract(x, y),
    lambda: (vec(4, -2, 2, "sub"), vec(4, -2, 2, "sub2")))
add("tf.math.multiply", "binary", lambda x, y: tf.math.multiply(x, y),
    lambda: (vec(4, -2, 2, "mul"), vec(4, -2, 2, "mul2")))
add("tf.math.multiply (broadcast)", "binary", lambda a, b: a * b,
    lambda: (mat((3, 1), -2, 2, "bm"), mat((1, 4), -2, 2, "bm2")))
add("tf.math.divide", "binary", lambda x, y: tf.math.divide(x, y),
    lambda: (vec(4, -2, 2, "div"), vec(4, 0.5, 2, "div2")))
add("tf.math.divide_no_nan", "binary", lambda x, y: tf.math.divide_no_nan(x, y),
    lambda: (vec(4, -2, 2, "dnn"), away(4, "dnn2", 0.5, 2.0)))
add("tf.math.pow", "binary", lambda x, y: tf.math.pow(x, y),
    lambda: (vec(4, 0.5, 2.0, "pow"), vec(4, -1.5, 1.5, "pow2")))
add("tf.math.atan2", "binary", lambda y, x: tf.math.atan2(y, x),
    lambda: (away(4, "atan2y"), vec(4, 0.4, 2.0, "atan2x")))
add("tf.math.maximum", "binary", lambda x, y: tf.math.maximum(x, y),
    lambda: (np.array([0.5, -1.0, 2.0, 0.1]), np.array([1.2, -1.6, 0.3, 0.9])))
add("tf.math.minimum", "binary", lambda a, b: tf.math.minimum(a, b),
    lambda: (np.array([0.5, -1.0, 2.0, 0.1]), np.array([1.2, -1.6, 0.3, 0.9])))
add("tf.math.squared_difference", "binary", lambda x, y: tf.math.squared_difference(x, y),
    lambda: (vec(4, -2, 2, "sqd"), vec(4, -2, 2, "sqd2")))
add("tf.math.xlogy", "binary", lambda x, y: tf.math.xlogy(x, y),
    lambda: (vec(4, -2, 2, "xlogy"), vec(4, 0.5, 3, "xlogy2")))
add("tf.math.xlog1py", "binary", lambda x, y: tf.math.xlog1py(x, y),
    lambda: (vec(4, -2, 2, "xl1py"), vec(4, -0.5, 2, "xl1py2")))
add("tf.math.xdivy", "binary", lambda x, y: tf.math.xdivy(x, y),
    lambda: (vec(4, -2, 2, "xdivy"), vec(4, 0.5, 2, "xdivy2")))
add("tf.math.igamma", "binary", lambda a, x: tf.math.igamma(a, x),
    lambda: (vec(4, 1.0, 3.0, "igamma"), vec(4, 0.5, 3.0, "igamma2")))
add("tf.math.igammac", "binary", lambda a, x: tf.math.igammac(a, x),
    lambda: (vec(4, 1.0, 3.0, "igammac"), vec(4, 0.5, 3.0, "igammac2")))
add("tf.math.betainc", "binary", lambda x: tf.math.betainc(c(2.0, x), c(3.5, x), x),
    lambda: (vec(4, 0.1, 0.9, "betainc"),))
add("tf.math.floormod", "binary", lambda a, b: tf.math.floormod(a, b),
    lambda: (np.array([2.3, -1.4, 3.7, 0.6]), np.array([1.5, 1.1, 1.6, 0.8])))
add("tf.math.add_n", "binary", lambda a, b: tf.math.add_n([a, b, a * b]),
    lambda: (vec(4, -2, 2, "addn"), vec(4, -2, 2, "addn2")))
add("tf.math.polyval", "binary",
    lambda coeffs, x: tf.math.polyval(tf.unstack(coeffs), x),
    lambda: (vec(3, -1.5, 1.5, "polyval"), vec(4, -1.5, 1.5, "polyval2")))
add("tf.math.lbeta", "binary", lambda x: tf.math.lbeta(x), lambda: (mat((2, 3), 0.5, 3, "lb"),))

# ------------------------------------------------------------------------------- reductions

M34 = (3, 4)
add("tf.reduce_sum", "reduction", lambda x: tf.reduce_sum(x, axis=1),
    lambda: (mat(M34, -2, 2, "rs"),))
add("tf.reduce_mean", "reduction", lambda x: tf.reduce_mean(x, axis=0),
    lambda: (mat(M34, -2, 2, "rm"),))
add("tf.reduce_logsumexp", "reduction", lambda x: tf.reduce_logsumexp(x, axis=1),
    lambda: (mat(M34, -2, 2, "rlse"),))
add("tf.reduce_prod", "reduction", lambda x: tf.reduce_prod(x, axis=1),
    lambda: (mat(M34, 0.5, 1.5, "rp"),))
add("tf.reduce_max", "reduction", lambda x: tf.reduce_max(x, axis=1),
    lambda: (mat(M34, -2, 2, "rmax"),))
add("tf.reduce_min", "reduction", lambda x: tf.reduce_min(x, axis=0),
    lambda: (mat(M34, -2, 2, "rmin"),))
add("tf.math.reduce_std", "reduction", lambda x: tf.math.reduce_std(x, axis=1),
    lambda: (mat(M34, -2, 2, "rstd"),))
add("tf.math.reduce_variance", "reduction", lambda x: tf.math.reduce_variance(x),
    lambda: (mat(M34, -2, 2, "rvar"),))
add("tf.math.reduce_euclidean_norm", "reduction",
    lambda x: tf.math.reduce_euclidean_norm(x, axis=1), lambda: (mat(M34, -2, 2, "ren"),))
add("tf.norm", "reduction", lambda x: tf.norm(x), lambda: (vec(5, -2, 2, "norm"),))
add("tf.norm (ord=1)", "reduction", lambda x: tf.norm(x, ord=1), lambda: (away(5, "norm1"),))
add("tf.norm (ord=inf)", "reduction", lambda x: tf.norm(x, ord=np.inf),
    lambda: (away(5, "norminf"),))
add("tf.norm (fro)", "reduction", lambda x: tf.norm(x, ord="fro", axis=[-2, -1]),
    lambda: (mat(M34, -2, 2, "fro"),))
add("tf.math.cumsum", "reduction", lambda x: tf.math.cumsum(x, axis=1),
    lambda: (mat(M34, -2, 2, "cs"),))
add("tf.math.cumsum (exclusive, reverse)", "reduction",
    lambda x: tf.math.cumsum(x, exclusive=True, reverse=True), lambda: (vec(5, -2, 2, "csx"),))
add("tf.math.cumprod", "reduction", lambda x: tf.math.cumprod(x, axis=1),
    lambda: (mat(M34, 0.5, 1.5, "cp"),))
add("tf.math.cumulative_logsumexp", "reduction", lambda x: tf.math.cumulative_logsumexp(x),
    lambda: (vec(5, -2, 2, "clse"),))
add("tf.math.top_k", "reduction", lambda x: tf.math.top_k(x, k=3).values,
    lambda: (vec(6, -2, 2, "topk"),))
add("tf.sort", "reduction", lambda x: tf.sort(x, direction="DESCENDING"),
    lambda: (vec(6, -2, 2, "sort"),))
add("tf.math.reduce_logsumexp (all)", "reduction", lambda x: tf.math.reduce_logsumexp(x),
    lambda: (mat(M34, -2, 2, "rlseall"),))

# ---------------------------------------------------------------------------- linear algebra

add("tf.linalg.matmul", "linalg", lambda a, b: tf.linalg.matmul(a, b),
    lambda: (mat((2, 3), -1, 1, "mm"), mat((3, 2), -1, 1, "mm2")))
add("tf.linalg.matmul (transpose_b)", "linalg",
    lambda a, b: tf.linalg.matmul(a, b, transpose_b=True),
    lambda: (mat((2, 3), -1, 1, "mmt"), mat((2, 3), -1, 1, "mmt2")))
add("tf.linalg.matvec", "linalg", lambda a, v: tf.linalg.matvec(a, v),
    lambda: (general(3, "mv"), vec(3, -1, 1, "mv2")))
add("tf.einsum (ij,jk->ik)", "linalg", lambda a, b: tf.einsum("ij,jk->ik", a, b),
    lambda: (mat((2, 3), -1, 1, "es"), mat((3, 2), -1, 1, "es2")))
add("tf.einsum (bij,bjk->bik)", "linalg", lambda a, b: tf.einsum("bij,bjk->bik", a, b),
    lambda: (mat((2, 2, 3), -1, 1, "eb"), mat((2, 3, 2), -1, 1, "eb2")))
add("tf.einsum (i,ij,j->)", "linalg", lambda v, a: tf.einsum("i,ij,j->", v, a, v),
    lambda: (vec(3, -1, 1, "eq"), general(3, "eq")))
add("tf.tensordot", "linalg", lambda a, b: tf.tensordot(a, b, axes=[[1], [0]]),
    lambda: (mat((2, 3), -1, 1, "td"), mat((3, 2), -1, 1, "td2")))
add("tf.linalg.inv", "linalg", lambda a: tf.linalg.inv(a), lambda: (general(3, "inv"),))
add("tf.linalg.det", "linalg", lambda a: tf.linalg.det(a), lambda: (general(3, "det"),))
add("tf.linalg.slogdet", "linalg", lambda a: tf.linalg.slogdet(a)[1],
    lambda: (general(3, "slogdet"),))
add("tf.linalg.logdet", "linalg", lambda a: tf.linalg.logdet(a), lambda: (spd(3, "logdet"),),
    symmetric=(0,))
add("tf.linalg.cholesky", "linalg", lambda a: tf.linalg.cholesky(a), lambda: (spd(3, "chol"),),
    symmetric=(0,))
add("tf.linalg.cholesky_solve", "linalg",
    lambda a, b: tf.linalg.cholesky_solve(tf.linalg.cholesky(a), b),
    lambda: (spd(3, "cs"), mat((3, 2), -1, 1, "cs2")), symmetric=(0,))
add("tf.linalg.eigh (eigenvalues)", "linalg", lambda a: tf.linalg.eigh(a)[0],
    lambda: (spd(3, "eigh"),))
add("tf.linalg.eigvalsh", "linalg", lambda a: tf.linalg.eigvalsh(a),
    lambda: (spd(3, "eigvalsh") - 2.0 * np.eye(3),))
add("tf.linalg.eigh (projector)", "linalg",
    lambda a: (lambda v: tf.linalg.matmul(v, v, transpose_b=True))(tf.linalg.eigh(a)[1][:, :1]),
    lambda: (spd(3, "eighv"),))
add("tf.linalg.qr", "linalg", lambda a: tf.linalg.qr(a), lambda: (general(3, "qr"),))
add("tf.linalg.svd (singular values)", "linalg",
    lambda a: tf.linalg.svd(a, compute_uv=False), lambda: (mat((3, 2), -1, 1, "svd"),))
add("tf.linalg.triangular_solve", "linalg",
    lambda matrix, rhs: tf.linalg.triangular_solve(matrix, rhs, lower=True),
    lambda: (lower(3, "ts"), mat((3, 2), -1, 1, "ts2")))
add("tf.linalg.solve", "linalg", lambda a, b: tf.linalg.solve(a, b),
    lambda: (general(3, "solve"), mat((3, 2), -1, 1, "solve2")))
add("tf.linalg.lstsq", "linalg", lambda a, b: tf.linalg.lstsq(a, b),
    lambda: (mat((4, 2), -1, 1, "lstsq") + np.eye(4, 2), mat((4, 1), -1, 1, "lstsq2")))
add("tf.linalg.expm", "linalg", lambda a: tf.linalg.expm(a),
    lambda: (0.5 * mat((3, 3), -1, 1, "expm"),), dtypes=("float64",),
    note="float64 only")
add("tf.linalg.trace", "linalg", lambda a: tf.linalg.trace(a), lambda: (general(3, "trace"),))
add("tf.math.l2_normalize", "linalg", lambda x: tf.math.l2_normalize(x, axis=-1),
    lambda: (mat((2, 3), -2, 2, "l2n"),))
add("tf.linalg.cross", "linalg", lambda a, b: tf.linalg.cross(a, b),
    lambda: (vec(3, -1, 1, "cross"), vec(3, -1, 1, "cross2")))
add("tf.linalg.diag_part", "linalg", lambda a: tf.linalg.diag_part(a),
    lambda: (general(3, "dp"),))
add("tf.linalg.set_diag", "linalg", lambda a, d: tf.linalg.set_diag(a, d),
    lambda: (general(3, "sd"), vec(3, -1, 1, "sd2")))
add("tf.linalg.tridiagonal_solve", "linalg",
    lambda diags, rhs: tf.linalg.tridiagonal_solve(diags, rhs),
    lambda: (np.stack([np.r_[vec(3, -0.5, 0.5, "tdu"), 0.0], vec(4, 2.0, 3.0, "tdd"),
                       np.r_[0.0, vec(3, -0.5, 0.5, "tdl")]]), vec(4, -1, 1, "tdr")))
add("tf.linalg.pinv", "linalg", lambda a: tf.linalg.pinv(a),
    lambda: (mat((3, 2), -1, 1, "pinv") + np.eye(3, 2),))
add("tf.linalg.sqrtm", "linalg", lambda a: tf.linalg.sqrtm(a), lambda: (spd(3, "sqrtm"),))
add("tf.linalg.LinearOperatorFullMatrix.solvevec", "linalg",
    lambda a, b: tf.linalg.LinearOperatorFullMatrix(a).solvevec(b),
    lambda: (general(3, "lo"), vec(3, -1, 1, "lo2")))
add("tf.linalg.global_norm", "linalg", lambda a, b: tf.linalg.global_norm([a, b]),
    lambda: (vec(3, -1, 1, "gn"), mat((2, 2), -1, 1, "gn2")))

# ---------------------------------------------------------------------- gather / scatter

add("tf.gather", "gather-scatter", lambda x: tf.gather(x, [3, 0, 3, 1]),
    lambda: (vec(5, -2, 2, "gather"),))
add("tf.gather (axis=1, batch_dims=1)", "gather-scatter",
    lambda x: tf.gather(x, [[2, 0], [1, 1]], axis=1, batch_dims=1),
    lambda: (mat((2, 4), -2, 2, "gatherb"),))
add("tf.gather_nd", "gather-scatter", lambda x: tf.gather_nd(x, [[0, 1], [2, 3], [0, 1]]),
    lambda: (mat(M34, -2, 2, "gnd"),))
add("tf.nn.embedding_lookup", "gather-scatter",
    lambda params: tf.nn.embedding_lookup(params, [2, 0, 2]),
    lambda: (mat((4, 2), -2, 2, "emb"),))
add("tf.math.segment_sum", "gather-scatter", lambda x: tf.math.segment_sum(x, [0, 0, 1, 2, 2]),
    lambda: (vec(5, -2, 2, "segsum"),))
add("tf.math.segment_mean", "gather-scatter",
    lambda x: tf.math.segment_mean(x, [0, 0, 1, 1, 1]), lambda: (vec(5, -2, 2, "segmean"),))
add("tf.math.segment_max", "gather-scatter",
    lambda x: tf.math.segment_max(x, [0, 0, 1, 1, 1]), lambda: (vec(5, -2, 2, "segmax"),))
add("tf.math.unsorted_segment_sum", "gather-scatter",
    lambda x: tf.math.unsorted_segment_sum(x, [1, 0, 1, 2, 0], num_segments=3),
    lambda: (vec(5, -2, 2, "usegsum"),))
add("tf.math.unsorted_segment_mean", "gather-scatter",
    lambda x: tf.math.unsorted_segment_mean(x, [1, 0, 1, 2, 0], num_segments=3),
    lambda: (vec(5, -2, 2, "usegmean"),))
add("tf.math.unsorted_segment_prod", "gather-scatter",
    lambda x: tf.math.unsorted_segment_prod(x, [1, 0, 1, 2, 0], num_segments=3),
    lambda: (vec(5, 0.5, 2, "usegprod"),))
add("tf.scatter_nd", "gather-scatter",
    lambda updates: tf.scatter_nd([[0], [3], [1]], updates, [5]),
    lambda: (vec(3, -2, 2, "scatter"),))
add("tf.tensor_scatter_nd_add", "gather-scatter",
    lambda x, updates: tf.tensor_scatter_nd_add(x, [[0], [2]], updates),
    lambda: (vec(4, -2, 2, "tsna"), vec(2, -2, 2, "tsna2")))
add("tf.tensor_scatter_nd_update", "gather-scatter",
    lambda x, updates: tf.tensor_scatter_nd_update(x, [[1], [3]], updates),
    lambda: (vec(4, -2, 2, "tsnu"), vec(2, -2, 2, "tsnu2")))
add("tf.boolean_mask", "gather-scatter",
    lambda x: tf.boolean_mask(x, [True, False, True, True, False]),
    lambda: (vec(5, -2, 2, "bmask"),))
add("tf.where", "gather-scatter",
    lambda x, y: tf.where([True, False, True, False], x * x, tf.sin(y)),
    lambda: (vec(4, -2, 2, "where"), vec(4, -2, 2, "where2")))
add("tf.dynamic_stitch", "gather-scatter",
    lambda a, b: tf.dynamic_stitch([[0, 2], [1, 3]], [a, b]),
    lambda: (vec(2, -2, 2, "stitch"), vec(2, -2, 2, "stitch2")))
add("tf.sparse.sparse_dense_matmul", "gather-scatter",
    lambda b: tf.sparse.sparse_dense_matmul(
        tf.sparse.SparseTensor([[0, 1], [1, 0], [2, 2]], tf.cast([1.5, -2.0, 0.5], b.dtype),
                               [3, 3]), b),
    lambda: (mat((3, 2), -1, 1, "spmm"),))

# -------------------------------------------------------------------------------- shape ops

add("tf.reshape", "shape", lambda x: tf.reshape(x, [4, 3]) * x[0, 0],
    lambda: (mat(M34, -2, 2, "reshape"),))
add("tf.transpose", "shape", lambda x: tf.transpose(x, [2, 0, 1]),
    lambda: (mat((2, 3, 2), -2, 2, "transpose"),))
add("tf.concat", "shape", lambda a, b: tf.concat([a, b, a], axis=0),
    lambda: (vec(3, -2, 2, "concat"), vec(2, -2, 2, "concat2")))
add("tf.stack", "shape", lambda a, b: tf.stack([a, b * b], axis=1),
    lambda: (vec(3, -2, 2, "stack"), vec(3, -2, 2, "stack2")))
add("tf.unstack", "shape", lambda x: tf.unstack(x)[1] * tf.unstack(x)[0],
    lambda: (mat((2, 3), -2, 2, "unstack"),))
add("tf.split", "shape", lambda x: tuple(tf.split(x, 2, axis=1)),
    lambda: (mat((2, 4), -2, 2, "split"),))
add("tf.tile", "shape", lambda x: tf.tile(x, [2, 3]), lambda: (mat((2, 2), -2, 2, "tile"),))
add("tf.pad", "shape", lambda x: tf.pad(x, [[1, 0], [0, 2]]),
    lambda: (mat((2, 2), -2, 2, "pad"),))
add("tf.pad (REFLECT)", "shape", lambda x: tf.pad(x, [[1, 1], [2, 1]], mode="REFLECT"),
    lambda: (mat((3, 3), -2, 2, "padr"),))
add("tf.reverse", "shape", lambda x: tf.reverse(x, axis=[1]) * x,
    lambda: (mat((2, 3), -2, 2, "reverse"),))
add("tf.roll", "shape", lambda x: tf.roll(x, shift=2, axis=0) * tf.range(5, dtype=x.dtype),
    lambda: (vec(5, -2, 2, "roll"),))
add("slicing x[1:, ::2]", "shape", lambda x: x[1:, ::2] ** 2,
    lambda: (mat(M34, -2, 2, "slice"),))
add("tf.strided_slice", "shape", lambda x: tf.strided_slice(x, [2, 0], [0, 4], [-1, 3]),
    lambda: (mat(M34, -2, 2, "sslice"),))
add("tf.linalg.band_part", "shape", lambda x: tf.linalg.band_part(x, 1, 0),
    lambda: (mat((3, 3), -2, 2, "band"),))
add("tf.expand_dims / tf.squeeze", "shape",
    lambda x: tf.squeeze(tf.expand_dims(x, 0) * tf.expand_dims(x, 1)),
    lambda: (vec(3, -2, 2, "expand"),))
add("tf.broadcast_to", "shape", lambda x: tf.broadcast_to(x, [3, 2]) * c([[1.0], [2.0], [3.0]], x),
    lambda: (vec(2, -2, 2, "bcast"),))
add("tf.repeat", "shape", lambda x: tf.repeat(x, [2, 1, 3]), lambda: (vec(3, -2, 2, "repeat"),))
add("tf.image.resize (bilinear)", "shape",
    lambda img: tf.image.resize(img, [5, 5], method="bilinear"),
    lambda: (mat((1, 3, 3, 1), -1, 1, "resize"),),
    defect=(("compiled", "img", "float64-arguments"),),
    defect_on_some_runs=(("non-finite", "img", "float64-arguments"),),
    evidence="(1) ForwardAccumulator.jvp(tf.image.resize(img)) is None (forward mode sees no"
             " dependence) while tape.gradient and a central difference agree (<u, Jv> ="
             " 3.7285 reverse, 3.7280 difference, float32 output): forward mode goes through"
             " the gradient of ResizeBilinearGrad, which TensorFlow declares"
             " NotDifferentiable (tensorflow/python/ops/image_grad.py:69); gradcheck's jvp"
             " check skips it, naming ResizeBilinear. (2) Under"
             " tf.function(jit_compile=True) the gradient of a float64 image is garbage"
             " (ResizeBilinearGrad with float32 grads and a float64 original_image gives"
             " -0.432, 2.2e-4, -1.5e-6, ... instead of -2.651, -1.716, -1.481, ...; denormals"
             " such as 4.65e-310 and NaN appear): XLA's kernel misreads the float64 case;"
             " float32 images agree to 5e-7. The op also returns float32 for float64 images.")
add("tf.image.rot90", "shape", lambda img: tf.image.rot90(img) * img,
    lambda: (mat((3, 3, 1), -1, 1, "rot90"),))
add("tf.signal.frame", "shape", lambda x: tf.signal.frame(x, 3, 2),
    lambda: (vec(7, -2, 2, "frame"),))
add("tf.signal.dct", "shape", lambda x: tf.signal.dct(x, type=2),
    lambda: (vec(6, -2, 2, "dct"),))
add("tf.nn.space_to_depth", "shape", lambda x: tf.nn.space_to_depth(x, 2) ** 2,
    lambda: (mat((1, 2, 4, 1), -2, 2, "s2d"),))

# ---------------------------------------------------------------------------------- nn ops

LABELS = [2, 0, 1]
add("tf.nn.softmax", "nn", lambda x: tf.nn.softmax(x), lambda: (mat(M34, -2, 2, "softmax"),))
add("tf.nn.softmax (axis=0)", "nn", lambda x: tf.nn.softmax(x, axis=0),
    lambda: (mat(M34, -2, 2, "softmax0"),))
add("tf.nn.log_softmax", "nn", lambda x: tf.nn.log_softmax(x),
    lambda: (mat(M34, -2, 2, "lsm"),))
add("tf.nn.conv1d", "nn", lambda x, w: tf.nn.conv1d(x, w, stride=1, padding="SAME"),
    lambda: (mat((1, 6, 2), -1, 1, "conv1d"), mat((3, 2, 2), -1, 1, "conv1dw")))
add("tf.nn.conv2d", "nn", lambda x, w: tf.nn.conv2d(x, w, strides=1, padding="VALID"),
    lambda: (mat((1, 4, 4, 2), -1, 1, "conv2d"), mat((2, 2, 2, 2), -1, 1, "conv2dw")))
add("tf.nn.conv2d (strided, SAME)", "nn",
    lambda x, w: tf.nn.conv2d(x, w, strides=2, padding="SAME"),
    lambda: (mat((1, 4, 4, 1), -1, 1, "conv2ds"), mat((3, 3, 1, 2), -1, 1, "conv2dsw")))
add("tf.nn.depthwise_conv2d", "nn",
    lambda x, w: tf.nn.depthwise_conv2d(x, w, strides=[1, 1, 1, 1], padding="VALID"),
    lambda: (mat((1, 3, 3, 2), -1, 1, "dw"), mat((2, 2, 2, 1), -1, 1, "dww")))
add("tf.nn.conv2d_transpose", "nn",
    lambda x, w: tf.nn.conv2d_transpose(x, w, [1, 4, 4, 1], strides=2, padding="SAME"),
    lambda: (mat((1, 2, 2, 2), -1, 1, "ct"), mat((2, 2, 1, 2), -1, 1, "ctw")))
add("tf.nn.avg_pool2d", "nn", lambda x: tf.nn.avg_pool2d(x, 2, 1, "VALID"),
    lambda: (mat((1, 3, 3, 2), -1, 1, "avgpool"),))
add("tf.nn.max_pool2d", "nn", lambda x: tf.nn.max_pool2d(x, 2, 2, "VALID"),
    lambda: (mat((1, 4, 4, 1), -2, 2, "maxpool"),))
add("tf.nn.max_pool1d", "nn", lambda x: tf.nn.max_pool1d(x, 2, 1, "VALID"),
    lambda: (mat((1, 5, 1), -2, 2, "maxpool1d"),))


def _layer_norm(x: Any, gamma: Any, beta: Any) -> Any:
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return gamma * (x - mean) * tf.math.rsqrt(variance + c(1e-5, x)) + beta


add("layer norm (tf.nn.moments composition)", "nn", _layer_norm,
    lambda: (mat((2, 4), -2, 2, "ln"), vec(4, 0.5, 1.5, "lng"), vec(4, -1, 1, "lnb")))
add("tf.nn.batch_normalization", "nn",
    lambda x, mean, variance: tf.nn.batch_normalization(x, mean, variance, None, None, 1e-3),
    lambda: (mat((3, 2), -2, 2, "bn"), vec(2, -1, 1, "bnm"), vec(2, 0.5, 2, "bnv")))
add("tf.nn.moments", "nn", lambda x: tf.nn.moments(x, axes=[0]),
    lambda: (mat(M34, -2, 2, "moments"),))
add("tf.nn.sparse_softmax_cross_entropy_with_logits", "nn",
    lambda logits: tf.nn.sparse_softmax_cross_entropy_with_logits(LABELS, logits),
    lambda: (mat(M34, -2, 2, "sparse_ce"),))
add("tf.nn.softmax_cross_entropy_with_logits", "nn",
    lambda logits: tf.nn.softmax_cross_entropy_with_logits(
        c([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1], [0.0, 0.5, 0.5, 0.0]], logits), logits),
    lambda: (mat(M34, -2, 2, "softmax_ce"),))
add("tf.nn.sigmoid_cross_entropy_with_logits", "nn",
    lambda logits: tf.nn.sigmoid_cross_entropy_with_logits(c([1.0, 0.0, 1.0, 0.3], logits),
                                                          logits),
    lambda: (vec(4, -2, 2, "sigce"),))
add("tf.nn.weighted_cross_entropy_with_logits", "nn",
    lambda logits: tf.nn.weighted_cross_entropy_with_logits(
        c([1.0, 0.0, 1.0, 0.3], logits), logits, pos_weight=2.0),
    lambda: (vec(4, -2, 2, "wce"),))
add("tf.nn.log_poisson_loss", "nn",
    lambda log_input: tf.nn.log_poisson_loss(c([1.0, 3.0, 0.0, 2.0], log_input), log_input,
                                             compute_full_loss=True),
    lambda: (vec(4, -1, 1.5, "lpl"),))
add("tf.nn.l2_loss", "nn", lambda x: tf.nn.l2_loss(x), lambda: (mat(M34, -2, 2, "l2loss"),))
add("tf.nn.bias_add", "nn", lambda x, b: tf.nn.bias_add(x, b),
    lambda: (mat((2, 3), -2, 2, "biasadd"), vec(3, -1, 1, "biasadd2")))
add("tf.nn.local_response_normalization", "nn",
    lambda x: tf.nn.local_response_normalization(x, depth_radius=1),
    lambda: (mat((1, 1, 2, 4), -2, 2, "lrn"),), dtypes=("float32",),
    note="LRN is float32-only in TensorFlow")
add("tf.nn.compute_average_loss", "nn",
    lambda losses: tf.nn.compute_average_loss(losses, global_batch_size=8),
    lambda: (vec(4, 0.1, 2, "avgloss"),))

# ----------------------------------------------------------------------------- control flow

add("tf.cond", "control-flow",
    lambda x: tf.cond(tf.reduce_sum(x) > 0, lambda: tf.sin(x) * x, lambda: -x * x),
    lambda: (vec(4, 0.2, 2, "cond"),))
add("tf.while_loop", "control-flow",
    lambda x: tf.while_loop(lambda i, v: i < 5, lambda i, v: (i + 1, v + 0.3 * tf.sin(v)),
                            (tf.constant(0), x))[1],
    lambda: (vec(4, -2, 2, "while"),))
add("tf.scan", "control-flow",
    lambda x: tf.scan(lambda acc, v: 0.5 * acc + tf.tanh(v), x),
    lambda: (vec(5, -2, 2, "scan"),))
add("tf.map_fn", "control-flow", lambda x: tf.map_fn(lambda row: tf.reduce_sum(row ** 3), x),
    lambda: (mat(M34, -1.5, 1.5, "mapfn"),))
add("tf.foldl", "control-flow", lambda x: tf.foldl(lambda acc, v: acc * v + 1.0, x),
    lambda: (vec(5, -1.5, 1.5, "foldl"),))
add("tf.foldr", "control-flow", lambda x: tf.foldr(lambda acc, v: tf.sin(acc) + v, x),
    lambda: (vec(5, -1.5, 1.5, "foldr"),))
add("tf.switch_case", "control-flow",
    lambda x: tf.switch_case(tf.constant(1), [lambda: tf.exp(x), lambda: tf.cos(x) * x]),
    lambda: (vec(4, -2, 2, "switch"),))


@tf.function
def _newton_sqrt(a: tf.Tensor) -> tf.Tensor:
    x = tf.ones_like(a)
    for _ in tf.range(6):
        x = 0.5 * (x + a / x)
    return x


@tf.function(jit_compile=False)
def _softplus_mlp(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    hidden = tf.nn.softplus(tf.linalg.matvec(w, x))
    return tf.reduce_logsumexp(hidden) + tf.reduce_sum(tf.sin(x))


@tf.function
def _cond_in_function(x: tf.Tensor) -> tf.Tensor:
    if tf.reduce_max(x) > 1.0:  # autograph turns this into tf.cond
        return tf.exp(-x * x)
    return x ** 3


add("tf.function (autograph loop)", "control-flow", _newton_sqrt,
    lambda: (vec(4, 0.5, 3, "newton"),))
add("tf.function(jit_compile=False)", "control-flow", _softplus_mlp,
    lambda: (vec(3, -1, 1, "mlp"), mat((4, 3), -1, 1, "mlpw")))
add("tf.function (autograph cond)", "control-flow", _cond_in_function,
    lambda: (vec(4, -0.5, 2, "fcond"),))
add("tf.function (tf.while_loop)", "control-flow",
    tf.function(lambda x: tf.while_loop(lambda i, v: i < 4,
                                        lambda i, v: (i + 1, tf.tanh(v) + v),
                                        (tf.constant(0), x))[1]),
    lambda: (vec(4, -1, 1, "fwhile"),))
add("tf.py_function", "control-flow",
    lambda x: tf.py_function(lambda v: v * v, [x], x.dtype),
    lambda: (vec(4, -2, 2, "pyfunc"),))
add("tf.recompute_grad", "control-flow",
    lambda x: tf.recompute_grad(lambda v: tf.tanh(v) * tf.exp(v))(x),
    lambda: (vec(4, -1, 1, "recompute"),))
add("tf.clip_by_norm", "control-flow", lambda x: tf.clip_by_norm(x, 1.0),
    lambda: (vec(4, -2, 2, "clipnorm"),))


BETAINC_FORWARD = (
    "forward mode gives a JVP of 0 with respect to a and b where reverse mode and a central"
    " difference agree (tfp.math.betainc at a=(1.947,1.305,2.541), b=(2.122,1.313,2.691),"
    " x=(0.332,0.488,0.685): <u, Jv> = 0 forward, -3.4915e-4 reverse, -3.4915e-4"
    " difference for a; 0 / 6.9056e-3 / 6.9056e-3 for b): TFP's a/b gradient is a"
    " tf.custom_gradient, which ForwardAccumulator does not use; it differentiates the raw"
    " Betainc op, whose registered gradient covers x only (tensorflow/python/ops/"
    "math_grad.py:1171, 'TODO: Perhaps add the derivative w.r.t. a, b')")
BETAINC_FLOAT32 = (
    "; and in float32 the reverse-mode gradient with respect to a is off by 1.7e-4 of |J|"
    " (1400 ulps) at x=0.685: tape.gradient gives -0.16255464 in float32 and -0.16258292 in"
    " float64 at the same float32 point, where float32 finite differences give -0.162584"
    " (2e-6 from the float64 value): TFP's float32 series for d betainc / da stops early."
    " Seen only when checked in float32 (dtype='float32'), whose finite differences resolve"
    " 1e-5 of |J|")


def _load_tfp() -> None:
    import tensorflow_probability as tfp

    tfd, tfb, tfm = tfp.distributions, tfp.bijectors, tfp.math

    # --------------------------------------------------------------- TFP special functions
    def special(name: str, f: Callable[..., Any], point: Callable[[], tuple[Any, ...]],
                **kw: Any) -> None:
        add(name, "tfp-special", f, point, library="tfp", **kw)

    special("tfp.math.lbeta", lambda a, b: tfm.lbeta(a, b),
            lambda: (vec(4, 0.5, 3, "tlbeta"), vec(4, 0.5, 3, "tlbeta2")))
    special("tfp.math.log_gamma_difference", lambda x, y: tfm.log_gamma_difference(x, y),
            lambda: (vec(4, 0.5, 2, "lgd"), vec(4, 1.0, 4, "lgd2")))
    special("tfp.math.betainc", lambda a, b, x: tfm.betainc(a, b, x),
            lambda: (vec(3, 1, 3, "tbi"), vec(3, 1, 3, "tbi2"), vec(3, 0.2, 0.8, "tbi3")),
            defect=(("jvp", "a"), ("jvp", "b")), evidence=BETAINC_FORWARD)
    special("tfp.math.igammainv", lambda a, p: tfm.igammainv(a, p),
            lambda: (vec(3, 1, 3, "igi"), vec(3, 0.2, 0.8, "igi2")))
    special("tfp.math.igammacinv", lambda a, p: tfm.igammacinv(a, p),
            lambda: (vec(3, 1, 3, "igci"), vec(3, 0.2, 0.8, "igci2")))
    special("tfp.math.bessel_ive", lambda z: tfm.bessel_ive(c([0.5, 1.3, 2.0], z), z),
            lambda: (vec(3, 0.5, 3, "ive2"),))
    special("tfp.math.log_bessel_ive", lambda z: tfm.log_bessel_ive(c([0.5, 1.3, 2.0], z), z),
            lambda: (vec(3, 0.5, 3, "live2"),))
    special("tfp.math.bessel_kve", lambda z: tfm.bessel_kve(c([0.5, 1.3, 2.0], z), z),
            lambda: (vec(3, 0.5, 3, "kve2"),))
    special("tfp.math.log_bessel_kve", lambda z: tfm.log_bessel_kve(c([0.5, 1.3, 2.0], z), z),
            lambda: (vec(3, 0.5, 3, "lkve2"),))
    special("tfp.math.bessel_iv_ratio", lambda z: tfm.bessel_iv_ratio(c([0.5, 1.3, 2.0], z), z),
            lambda: (vec(3, 0.5, 3, "ivr2"),))
    special("tfp.math.lambertw", lambda z: tfm.lambertw(z), lambda: (vec(4, -0.3, 3, "lw"),))
    special("tfp.math.owens_t", lambda h, a: tfm.owens_t(h, a),
            lambda: (vec(3, -1.5, 1.5, "owt"), vec(3, 0.3, 2, "owt2")))
    special("tfp.math.erfcinv", lambda x: tfm.erfcinv(x), lambda: (vec(4, 0.2, 1.8, "erfci"),))
    special("tfp.math.softplus_inverse", lambda x: tfm.softplus_inverse(x),
            lambda: (vec(4, 0.2, 3, "spi"),))
    special("tfp.math.log1mexp", lambda x: tfm.log1mexp(x), lambda: (vec(4, 0.2, 3, "l1me"),))
    special("tfp.math.log_sub_exp", lambda x, y: tfm.log_sub_exp(x, y),
            lambda: (vec(3, 1.0, 2.0, "lse"), vec(3, -1.0, 0.5, "lse2")))
    special("tfp.math.log_add_exp", lambda x, y: tfm.log_add_exp(x, y),
            lambda: (vec(3, -2, 2, "lae"), vec(3, -2, 2, "lae2")))
    special("tfp.math.logerfc", lambda x: tfm.logerfc(x), lambda: (vec(4, -2, 4, "logerfc"),))
    special("tfp.math.erfcx", lambda x: tfm.erfcx(x), lambda: (vec(4, -1, 4, "erfcx"),))
    special("tfp.math.dawsn", lambda x: tfm.dawsn(x), lambda: (vec(4, -2, 2, "tdawsn"),))
    special("tfp.math.log_cosh", lambda x: tfm.log_cosh(x), lambda: (vec(4, -3, 3, "lcosh"),))
    special("tfp.math.atan_difference", lambda x, y: tfm.atan_difference(x, y),
            lambda: (vec(3, -2, 2, "atd"), vec(3, -2, 2, "atd2")))
    special("tfp.math.log1psquare", lambda x: tfm.log1psquare(x),
            lambda: (vec(4, -3, 3, "l1psq"),))
    special("tfp.math.sqrt1pm1", lambda x: tfm.sqrt1pm1(x), lambda: (vec(4, -0.5, 3, "s1pm1"),))
    special("tfp.math.log_gamma_correction", lambda x: tfm.log_gamma_correction(x),
            lambda: (vec(4, 10.0, 20.0, "lgc"),))
    special("tfp.math.reduce_weighted_logsumexp",
            lambda x, w: tfm.reduce_weighted_logsumexp(x, w=w, axis=-1),
            lambda: (mat((2, 3), -2, 2, "rwlse"), mat((2, 3), 0.5, 2, "rwlse2")))
    special("tfp.math.reduce_logmeanexp", lambda x: tfm.reduce_logmeanexp(x, axis=0),
            lambda: (mat((3, 2), -2, 2, "rlme"),))
    special("tfp.math.log_cumsum_exp", lambda x: tfm.log_cumsum_exp(x),
            lambda: (vec(5, -2, 2, "lcse"),))
    special("tfp.math.fill_triangular", lambda x: tfm.fill_triangular(x),
            lambda: (vec(6, -2, 2, "filltri"),))
    special("tfp.math.smootherstep", lambda x: tfm.smootherstep(x),
            lambda: (vec(4, 0.1, 0.9, "smoother"),))
    special("tfp.math.soft_threshold", lambda x: tfm.soft_threshold(x, 0.5),
            lambda: (away(4, "softthr", 0.7, 2.0),))
    special("tfp.math.trapz", lambda y: tfm.trapz(y, dx=0.5), lambda: (vec(5, -2, 2, "trapz"),))
    special("tfp.math.interp_regular_1d_grid",
            lambda x, y_ref: tfm.interp_regular_1d_grid(x, 0.0, 1.0, y_ref),
            lambda: (vec(3, 0.1, 0.9, "interp"), vec(5, -2, 2, "interp2")))
    special("tfp.math.hpsd_logdet", lambda a: tfm.hpsd_logdet(a), lambda: (spd(3, "hpsdld"),),
            symmetric=(0,))
    special("tfp.math.hpsd_solvevec", lambda a, v: tfm.hpsd_solvevec(a, v),
            lambda: (spd(3, "hpsdsv"), vec(3, -1, 1, "hpsdsv2")), symmetric=(0,))
    special("tfp.math.hpsd_quadratic_form_solvevec",
            lambda a, v: tfm.hpsd_quadratic_form_solvevec(a, v),
            lambda: (spd(3, "hpsdq"), vec(3, -1, 1, "hpsdq2")), symmetric=(0,))
    special("tfp.math.psd_kernels.ExponentiatedQuadratic",
            lambda amplitude, length_scale, x: tfm.psd_kernels.ExponentiatedQuadratic(
                amplitude, length_scale).matrix(x, x),
            lambda: (np.array(1.3), np.array(0.8), mat((3, 2), -1, 1, "eqk")))
    special("tfp.math.psd_kernels.MaternFiveHalves",
            lambda length_scale, x, z: tfm.psd_kernels.MaternFiveHalves(
                length_scale=length_scale).matrix(x, z),
            lambda: (np.array(0.9), mat((3, 2), -1, 1, "m52x"), mat((2, 2), 1.5, 2.5, "m52z")))

    # ------------------------------------------------------------------ TFP distributions
    def dist(name: str, f: Callable[..., Any], point: Callable[[], tuple[Any, ...]],
             **kw: Any) -> None:
        add(name, "tfp-distribution", f, point, library="tfp", **kw)

    dist("tfd.Normal.log_prob", lambda loc, scale, x: tfd.Normal(loc, scale).log_prob(x),
         lambda: (np.array(0.3), np.array(1.4), vec(3, -2, 2, "nlp")))
    dist("tfd.Normal.cdf", lambda loc, scale, x: tfd.Normal(loc, scale).cdf(x),
         lambda: (np.array(0.3), np.array(1.4), vec(3, -2, 2, "ncdf")))
    dist("tfd.Normal.log_cdf", lambda loc, scale, x: tfd.Normal(loc, scale).log_cdf(x),
         lambda: (np.array(0.3), np.array(1.4), vec(3, -4, 2, "nlcdf")))
    dist("tfd.Normal.survival_function",
         lambda loc, scale, x: tfd.Normal(loc, scale).survival_function(x),
         lambda: (np.array(0.3), np.array(1.4), vec(3, -2, 2, "nsf")))
    dist("tfd.Normal.log_prob (float32 literals)",
         lambda x: tfd.Normal(0.0, 1.0).log_prob(x),
         lambda: (vec(3, -2, 2, "nlp32"),), dtypes=("float32",),
         note="as users write it: Normal(0., 1.) is float32, so float64 inputs raise")
    dist("tfd.Normal.sample (stateless seed)",
         lambda loc, scale: tfd.Normal(loc, scale).sample(4, seed=(1, 2)),
         lambda: (np.array(0.3), np.array(1.4)))
    dist("tfd.Gamma.log_prob",
         lambda concentration, rate, x: tfd.Gamma(concentration, rate).log_prob(x),
         lambda: (np.array(2.5), np.array(1.3), vec(3, 0.5, 3, "glp")))
    dist("tfd.Gamma.cdf", lambda concentration, rate, x: tfd.Gamma(concentration, rate).cdf(x),
         lambda: (np.array(2.5), np.array(1.3), vec(3, 0.5, 3, "gcdf")))
    dist("tfd.Gamma.entropy", lambda concentration, rate: tfd.Gamma(concentration,
                                                                      rate).entropy(),
         lambda: (vec(2, 1, 3, "gent"), vec(2, 0.5, 2, "gent2")))
    dist("tfd.Beta.log_prob", lambda a, b, x: tfd.Beta(a, b).log_prob(x),
         lambda: (np.array(2.0), np.array(3.5), vec(3, 0.1, 0.9, "blp")))
    dist("tfd.Beta.cdf", lambda a, b, x: tfd.Beta(a, b).cdf(x),
         lambda: (np.array(2.0), np.array(3.5), vec(3, 0.1, 0.9, "bcdf")),
         defect=(("jvp", "a"), ("jvp", "b"), ("jacobian", "a", "float32")),
         evidence=BETAINC_FORWARD + BETAINC_FLOAT32)
    dist("tfd.StudentT.log_prob",
         lambda df, loc, scale, x: tfd.StudentT(df, loc, scale).log_prob(x),
         lambda: (np.array(4.5), np.array(0.2), np.array(1.3), vec(3, -2, 2, "stlp")))
    dist("tfd.StudentT.cdf", lambda df, loc, scale, x: tfd.StudentT(df, loc, scale).cdf(x),
         lambda: (np.array(4.5), np.array(0.2), np.array(1.3), vec(3, -2, 2, "stcdf")))
    dist("tfd.Poisson.log_prob (rate)",
         lambda rate: tfd.Poisson(rate).log_prob(c([0.0, 2.0, 5.0], rate)),
         lambda: (vec(3, 0.5, 4, "plp"),))
    dist("tfd.Poisson.cdf (rate)", lambda rate: tfd.Poisson(rate).cdf(c([1.0, 2.0, 4.0], rate)),
         lambda: (vec(3, 0.5, 4, "pcdf"),))
    dist("tfd.Exponential.log_survival_function",
         lambda rate, x: tfd.Exponential(rate).log_survival_function(x),
         lambda: (np.array(1.7), vec(3, 0.2, 3, "elsf")))
    dist("tfd.Exponential.log_prob", lambda rate, x: tfd.Exponential(rate).log_prob(x),
         lambda: (np.array(1.7), vec(3, 0.2, 3, "elp")))
    dist("tfd.Weibull.log_prob",
         lambda concentration, scale, x: tfd.Weibull(concentration, scale).log_prob(x),
         lambda: (np.array(1.8), np.array(1.2), vec(3, 0.3, 3, "wlp")))
    dist("tfd.VonMises.log_prob",
         lambda loc, concentration, x: tfd.VonMises(loc, concentration).log_prob(x),
         lambda: (np.array(0.4), np.array(2.5), vec(3, -2.5, 2.5, "vmlp")))
    dist("tfd.VonMises.cdf",
         lambda loc, concentration, x: tfd.VonMises(loc, concentration).cdf(x),
         lambda: (np.array(0.4), np.array(2.5), vec(3, -2.5, 2.5, "vmcdf")))
    dist("tfd.MultivariateNormalTriL.log_prob",
         lambda loc, scale_tril, x: tfd.MultivariateNormalTriL(loc, scale_tril).log_prob(x),
         lambda: (vec(3, -1, 1, "mvnloc"), lower(3, "mvn"), mat((2, 3), -2, 2, "mvnx")))
    dist("tfd.Dirichlet.log_prob", lambda concentration, x: tfd.Dirichlet(
        concentration).log_prob(x),
         lambda: (vec(3, 1.5, 4, "dir"), simplex(3, "dirx")))
    dist("tfd.Kumaraswamy.log_prob", lambda a, b, x: tfd.Kumaraswamy(a, b).log_prob(x),
         lambda: (np.array(2.0), np.array(3.0), vec(3, 0.1, 0.9, "kulp")))
    dist("tfd.Kumaraswamy.cdf", lambda a, b, x: tfd.Kumaraswamy(a, b).cdf(x),
         lambda: (np.array(2.0), np.array(3.0), vec(3, 0.1, 0.9, "kucdf")))
    dist("tfd.GeneralizedPareto.log_prob",
         lambda loc, scale, concentration, x: tfd.GeneralizedPareto(
             loc, scale, concentration).log_prob(x),
         lambda: (np.array(0.1), np.array(1.5), np.array(0.3), vec(3, 0.5, 3, "gplp")))
    dist("tfd.TruncatedNormal.log_prob",
         lambda loc, scale, x: tfd.TruncatedNormal(loc, scale, c(-1.0, x), c(2.0, x)).log_prob(x),
         lambda: (np.array(0.3), np.array(0.8), vec(3, -0.8, 1.8, "tnlp")))
    dist("tfd.Binomial.log_prob (probs)",
         lambda probs: tfd.Binomial(total_count=c(5.0, probs), probs=probs).log_prob(
             c([0.0, 2.0, 4.0], probs)),
         lambda: (vec(3, 0.2, 0.8, "binlp"),))
    dist("tfd.Categorical.log_prob (logits)",
         lambda logits: tfd.Categorical(logits=logits).log_prob([2, 0]),
         lambda: (mat((2, 3), -2, 2, "catlp"),))
    dist("tfd.kl_divergence (Normal, Normal)",
         lambda m1, s1, m2, s2: tfd.kl_divergence(tfd.Normal(m1, s1), tfd.Normal(m2, s2)),
         lambda: (np.array(0.3), np.array(1.2), np.array(-0.4), np.array(0.7)))
    dist("tfd.MixtureSameFamily.log_prob",
         lambda logits, locs, x: tfd.MixtureSameFamily(
             tfd.Categorical(logits=logits), tfd.Normal(locs, c(1.0, locs))).log_prob(x),
         lambda: (vec(2, -1, 1, "mixl"), vec(2, -1.5, 1.5, "mixm"), vec(3, -2, 2, "mixx")))

    # ------------------------------------------------------------------------ TFP bijectors
    def bij(name: str, f: Callable[..., Any], point: Callable[[], tuple[Any, ...]],
            **kw: Any) -> None:
        add(name, "tfp-bijector", f, point, library="tfp", **kw)

    bij("tfb.Softplus.forward", lambda x: tfb.Softplus().forward(x),
        lambda: (vec(4, -2, 2, "bspf"),))
    bij("tfb.Softplus.inverse", lambda y: tfb.Softplus().inverse(y),
        lambda: (vec(4, 0.3, 2, "bspi"),))
    bij("tfb.Softplus.forward_log_det_jacobian",
        lambda x: tfb.Softplus().forward_log_det_jacobian(x, event_ndims=0),
        lambda: (vec(4, -2, 2, "bspl"),))
    bij("tfb.Exp.forward", lambda x: tfb.Exp().forward(x), lambda: (vec(4, -2, 2, "bexpf"),))
    bij("tfb.Exp.inverse_log_det_jacobian",
        lambda y: tfb.Exp().inverse_log_det_jacobian(y, event_ndims=1),
        lambda: (vec(4, 0.3, 3, "bexpi"),))
    bij("tfb.Sigmoid.forward", lambda x: tfb.Sigmoid().forward(x),
        lambda: (vec(4, -2, 2, "bsigf"),))
    bij("tfb.Sigmoid.inverse", lambda y: tfb.Sigmoid().inverse(y),
        lambda: (vec(4, 0.1, 0.9, "bsigi"),))
    bij("tfb.Tanh.forward_log_det_jacobian",
        lambda x: tfb.Tanh().forward_log_det_jacobian(x, event_ndims=0),
        lambda: (vec(4, -2, 2, "btanh"),))
    bij("tfb.FillScaleTriL.forward",
        lambda x: tfb.FillScaleTriL(diag_shift=c(1e-5, x)).forward(x),
        lambda: (vec(6, -1, 1, "bfst"),))
    bij("tfb.CholeskyOuterProduct.forward", lambda x: tfb.CholeskyOuterProduct().forward(x),
        lambda: (lower(3, "bcop"),))
    bij("tfb.CholeskyOuterProduct.forward_log_det_jacobian",
        lambda x: tfb.CholeskyOuterProduct().forward_log_det_jacobian(x, event_ndims=2),
        lambda: (lower(3, "bcopl"),))
    bij("tfb.Chain([Shift, Scale]).forward",
        lambda shift, scale, x: tfb.Chain([tfb.Shift(shift), tfb.Scale(scale)]).forward(x),
        lambda: (np.array(0.7), np.array(1.6), vec(3, -2, 2, "bchain")))
    bij("tfb.SinhArcsinh.forward",
        lambda skewness, tailweight, x: tfb.SinhArcsinh(skewness, tailweight).forward(x),
        lambda: (np.array(0.4), np.array(1.3), vec(3, -2, 2, "bsas")))
    bij("tfb.SinhArcsinh.inverse_log_det_jacobian",
        lambda skewness, tailweight, y: tfb.SinhArcsinh(
            skewness, tailweight).inverse_log_det_jacobian(y, event_ndims=0),
        lambda: (np.array(0.4), np.array(1.3), vec(3, -2, 2, "bsasi")))
    bij("tfb.Reshape.forward", lambda x: tfb.Reshape([2, 3]).forward(x) ** 2,
        lambda: (vec(6, -2, 2, "breshape"),))
    bij("tfb.SoftmaxCentered.forward", lambda x: tfb.SoftmaxCentered().forward(x),
        lambda: (vec(3, -2, 2, "bsmc"),))
    bij("tfb.NormalCDF.forward", lambda x: tfb.NormalCDF().forward(x),
        lambda: (vec(4, -2, 2, "bncdf"),))
    bij("tfb.Invert(Softplus).forward", lambda x: tfb.Invert(tfb.Softplus()).forward(x),
        lambda: (vec(4, 0.3, 2, "binv"),))
    bij("tfb.CorrelationCholesky.forward", lambda x: tfb.CorrelationCholesky().forward(x),
        lambda: (vec(3, -1, 1, "bcorr"),))
    bij("tfb.KumaraswamyCDF.forward",
        lambda a, b, x: tfb.KumaraswamyCDF(a, b).forward(x),
        lambda: (np.array(2.0), np.array(3.0), vec(3, 0.1, 0.9, "bkum")))
    bij("tfb.Power.forward", lambda x: tfb.Power(2.5).forward(x),
        lambda: (vec(4, 0.3, 2, "bpow"),))
    bij("tfb.MatvecLU.forward",
        lambda lower_upper, x: tfb.MatvecLU(lower_upper, [0, 1, 2]).forward(x),
        lambda: (general(3, "blu"), vec(3, -1, 1, "blu2")))


def _load_gpflow() -> None:
    import gpflow

    kernels: dict[tuple[str, str], Any] = {}

    def kernel(kind: str, dtype: Any) -> Any:
        """One kernel per dtype (GPflow parameters have a fixed dtype), built on first use."""
        key = (kind, tf.as_dtype(dtype).name)
        if key not in kernels:
            config = dataclasses.replace(gpflow.config.config(),
                                         float=tf.as_dtype(dtype).as_numpy_dtype)
            with gpflow.config.as_context(config):
                k = gpflow.kernels
                kernels[key] = {
                    "SquaredExponential": lambda: k.SquaredExponential(variance=1.3,
                                                                       lengthscales=0.8),
                    "Matern32": lambda: k.Matern32(variance=0.9, lengthscales=1.1),
                    "Matern52": lambda: k.Matern52(variance=1.2, lengthscales=0.7),
                    "Periodic": lambda: k.Periodic(k.SquaredExponential(lengthscales=0.9),
                                                   period=1.7),
                    "RationalQuadratic": lambda: k.RationalQuadratic(alpha=1.5,
                                                                     lengthscales=0.9),
                    "Sum(Linear, RBF)": lambda: k.Linear(variance=0.5) + k.RBF(),
                }[kind]()
        return kernels[key]

    def gp(name: str, f: Callable[..., Any], point: Callable[[], tuple[Any, ...]]) -> None:
        add(name, "gpflow", f, point, library="gpflow")

    def cross_covariance(kind: str) -> None:
        gp(f"gpflow.kernels.{kind}.K(X, Z)", lambda X, Z: kernel(kind, X.dtype).K(X, Z),
           lambda: (mat((3, 2), -1, 1, kind), mat((2, 2), 1.2, 2.5, kind)))

    for kind in ("SquaredExponential", "Matern32", "Matern52", "Periodic",
                 "RationalQuadratic", "Sum(Linear, RBF)"):
        cross_covariance(kind)
    gp("gpflow.kernels.SquaredExponential.K(X)",
       lambda X: kernel("SquaredExponential", X.dtype).K(X),
       lambda: (mat((3, 2), -1, 1, "seKX"),))
    gp("gpflow.kernels.Matern52.K_r2 (lengthscale argument)",
       lambda lengthscale, X, Z: kernel("Matern52", X.dtype).K_r2(
           gpflow.utilities.ops.square_distance(X / lengthscale, Z / lengthscale)),
       lambda: (np.array(0.8), mat((3, 2), -1, 1, "m52r"), mat((2, 2), 1.2, 2.5, "m52r2")))
    gp("gpflow.optimizers.natgrad.meanvarsqrt_to_expectation",
       lambda m, v_sqrt: gpflow.optimizers.natgrad.meanvarsqrt_to_expectation(m, v_sqrt),
       lambda: (mat((3, 1), -1, 1, "ngm"), lower(3, "ngv")[None]))
    gp("gpflow.optimizers.natgrad.meanvarsqrt_to_natural",
       lambda m, v_sqrt: gpflow.optimizers.natgrad.meanvarsqrt_to_natural(m, v_sqrt),
       lambda: (mat((3, 1), -1, 1, "ngnm"), lower(3, "ngnv")[None]))
    def variational_expectations(Fmu: Any, Fvar: Any) -> Any:
        """A likelihood built inside f, in the inputs' dtype (a new variance variable per
        call), as in eager code that builds its model on the fly."""
        config = dataclasses.replace(gpflow.config.config(), float=Fmu.dtype.as_numpy_dtype)
        with gpflow.config.as_context(config):
            likelihood = gpflow.likelihoods.Gaussian(variance=0.5)
        return likelihood.variational_expectations(Fmu, Fmu, Fvar, c([[0.3], [-1.0], [0.8]],
                                                                     Fmu))

    gp("gpflow.likelihoods.Gaussian.variational_expectations", variational_expectations,
       lambda: (mat((3, 1), -1, 1, "gve"), mat((3, 1), 0.2, 1, "gve2")))


_load_tfp()
_load_gpflow()


# Validated like the rest, but left to `benchmarks/accuracy.py --full` so that
# tests/test_real_world.py stays within a few minutes on two cores: near-duplicates of core
# entries, and TFP functions that take 5-20 s per gradcheck run (their eager while_loops).
EXTENDED = frozenset({
    "tf.math.sinh", "tf.math.cosh", "tf.math.acos", "tf.math.reciprocal", "tf.math.erfc",
    "tf.math.log_sigmoid", "tf.math.bessel_i1e", "tf.math.special.fresnel_cos",
    "tf.nn.softsign", "tf.nn.relu6", "tf.nn.silu", "tf.math.expm1",
    "tf.math.xdivy", "tf.math.divide_no_nan", "tf.math.minimum",
    "tf.reduce_min", "tf.math.reduce_logsumexp (all)", "tf.norm (ord=inf)",
    "tf.linalg.matmul (transpose_b)", "tf.tensordot", "tf.linalg.diag_part",
    "tf.linalg.global_norm", "tf.linalg.cross",
    "tf.math.segment_mean", "tf.math.unsorted_segment_mean",
    "tf.image.rot90", "tf.nn.space_to_depth", "tf.expand_dims / tf.squeeze",
    "tf.broadcast_to",
    "tf.nn.softmax (axis=0)", "tf.nn.conv2d (strided, SAME)", "tf.nn.max_pool1d",
    "tf.nn.weighted_cross_entropy_with_logits", "tf.nn.compute_average_loss",
    "tf.nn.l2_loss",
    "tfp.math.bessel_ive", "tfp.math.bessel_kve", "tfp.math.log_bessel_kve",
    "tfp.math.bessel_iv_ratio", "tfp.math.igammacinv", "tfp.math.owens_t",
    "tfp.math.log_add_exp", "tfp.math.log1psquare", "tfp.math.sqrt1pm1",
    "tfp.math.log_gamma_correction", "tfp.math.reduce_logmeanexp", "tfp.math.log_cumsum_exp",
    "tfp.math.smootherstep", "tfp.math.trapz", "tfp.math.hpsd_solvevec",
    "tfd.Normal.survival_function", "tfd.Exponential.log_prob", "tfd.Kumaraswamy.cdf",
    "tfd.StudentT.cdf", "tfd.VonMises.cdf", "tfd.TruncatedNormal.log_prob",
    "tfb.Exp.forward", "tfb.Sigmoid.forward", "tfb.NormalCDF.forward", "tfb.Power.forward",
    "gpflow.kernels.Sum(Linear, RBF).K(X, Z)",
    "gpflow.optimizers.natgrad.meanvarsqrt_to_natural",
})
# Core entries whose gradcheck run takes over ~2 s: no mutants for them in the test.
SLOW = frozenset({
    "tfp.math.log_bessel_ive", "tfp.math.igammainv", "tfp.math.betainc", "tf.linalg.expm",
    "tfd.Beta.cdf", "tfd.MultivariateNormalTriL.log_prob", "tf.function (autograph loop)",
    "tf.function (tf.while_loop)", "tfd.Beta.log_prob",
})
_unknown = (EXTENDED | SLOW) - {case.name for case in CATALOGUE}
if _unknown:
    raise ValueError(f"unknown names: {sorted(_unknown)}")
CORE = [case for case in CATALOGUE if case.name not in EXTENDED]


# Always mutated: the kinds of code seen misjudged in real use.
MUTANT_PICKS = (
    "tf.math.atan2", "tf.math.segment_sum", "tf.scatter_nd", "tf.py_function",
    "tf.linalg.cholesky", "tf.function(jit_compile=False)", "tfb.FillScaleTriL.forward",
    "gpflow.optimizers.natgrad.meanvarsqrt_to_expectation",
)


def mutant_subset(per_category: int = 1) -> list[Case]:
    """A representative, deterministic subset of the core for mutation: `per_category`
    evenly spaced fast entries of each category, plus MUTANT_PICKS."""
    chosen = [by_name(name) for name in MUTANT_PICKS]
    for category in dict.fromkeys(case.category for case in CORE):
        members = [c for c in CORE if c.category == category and c.name not in SLOW
                   and c not in chosen]
        step = max(1, len(members) // per_category)
        chosen += members[step // 2::step][:per_category]
    return chosen


def by_name(name: str) -> Case:
    return next(case for case in CATALOGUE if case.name == name)


# ------------------------------------------------------------------- validation by hand

def tape_jacobians(f: Callable[..., Any], args: tuple[np.ndarray, ...]) -> list[list[np.ndarray]]:
    """J[k][i] (output k flattened x input i flattened), one fresh tape and fresh input
    tensors per output element (TFP bijectors cache results by input tensor identity)."""
    outputs = [np.asarray(o) for o in tf.nest.flatten(f(*[tf.constant(a) for a in args]))]
    blocks = [[np.zeros((o.size, a.size)) for a in args] for o in outputs]
    for k, out in enumerate(outputs):
        for row in range(out.size):
            xs = [tf.constant(a) for a in args]
            with tf.GradientTape() as tape:
                tape.watch(xs)
                y = tf.reshape(tf.nest.flatten(f(*xs))[k], [-1])[row]
            grads = tape.gradient(y, xs, unconnected_gradients=tf.UnconnectedGradients.ZERO)
            for i, g in enumerate(grads):
                blocks[k][i][row] = np.asarray(tf.convert_to_tensor(g)).reshape(-1)
    return blocks


def _directions(shape: tuple[int, ...], symmetric: bool) -> list[np.ndarray]:
    """Unit perturbations: one per element, or E_ij = e_ij + e_ji (i <= j) for a matrix
    argument whose function reads one triangle (TensorFlow returns the symmetric part)."""
    size = int(np.prod(shape))
    if not symmetric:
        return list(np.eye(size))
    n = shape[-1]
    found = []
    for i in range(n):
        for j in range(i, n):
            e = np.zeros(shape)
            e[..., i, j] = 1.0
            e[..., j, i] = 1.0
            found.append(e.reshape(-1))
    return found


def stencil_jacobians(f: Callable[..., Any], args: tuple[np.ndarray, ...],
                      directions: list[list[np.ndarray]], step: float = 1e-3
                      ) -> list[list[np.ndarray]]:
    """Directional derivatives from a 6th-order central difference (7-point stencil)."""
    weights = {1: 45.0, 2: -9.0, 3: 1.0}  # (45(f1-f-1) - 9(f2-f-2) + (f3-f-3)) / 60h
    outputs = [np.asarray(o) for o in tf.nest.flatten(f(*[tf.constant(a) for a in args]))]
    blocks = [[np.zeros((o.size, len(d))) for d in directions] for o in outputs]
    for i, a in enumerate(args):
        for j, direction in enumerate(directions[i]):
            h = step * max(1.0, float(np.max(np.abs(a.reshape(-1)[direction != 0]))))
            total = [np.zeros(o.size) for o in outputs]
            for m, w in weights.items():
                for sign in (1.0, -1.0):
                    moved = [np.array(v) for v in args]
                    delta = (sign * m * h * direction).reshape(a.shape)
                    moved[i] = (moved[i] + delta).astype(a.dtype)
                    values = tf.nest.flatten(f(*[tf.constant(v) for v in moved]))
                    for k, v in enumerate(values):
                        total[k] += sign * w * np.asarray(v, dtype=np.float64).reshape(-1)
            for k in range(len(outputs)):
                blocks[k][i][:, j] = total[k] / (60.0 * h)
    return blocks


def validate(case: Case) -> float:
    """Largest |tape - stencil| relative to each block's max |J|, in float64 (in float32 for
    float32-only cases), along symmetric directions for `symmetric` arguments."""
    args = case.arguments("float64" if "float64" in case.dtypes else "float32")
    directions = [_directions(a.shape, i in case.symmetric) for i, a in enumerate(args)]
    autodiff = [[block @ np.asarray(d).T for block, d in zip(row, directions)]
                for row in tape_jacobians(case.f, args)]
    reference = stencil_jacobians(case.f, args, directions)
    worst = 0.0
    for row_a, row_r in zip(autodiff, reference):
        for a, r in zip(row_a, row_r):
            scale = max(float(np.max(np.abs(r), initial=0.0)), 1e-12)
            worst = max(worst, float(np.max(np.abs(a - r), initial=0.0)) / scale)
    return worst
