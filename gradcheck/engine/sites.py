"""One observed custom gradient called on its own: its VJP for an upstream, and the true
Jacobian of its forward pass by central differences (its own autodiff may be cut)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np

from gradcheck.engine.arrays import as_array
from gradcheck.engine.instrument import Site
from gradcheck.engine.runtime import functions_eager, tensorflow
from gradcheck.numerics import differences, tolerances

# Above this many input elements, the forward's Jacobian is not computed element by element.
FORWARD_JACOBIAN_SIZE = 256


def _with_tensor_at(args: list[Any], index: int) -> tuple[Any, list[Any], Any]:
    """TensorFlow, the site's arguments with argument `index` as a tensor, and that tensor."""
    tf = tensorflow()
    args = list(args)
    args[index] = tf.constant(args[index])
    return tf, args, args[index]


def site_vjp(site: Site, args: list[Any], index: int, upstream_seed: int = 1,
             kwargs: dict[str, Any] | None = None
             ) -> tuple[np.ndarray, np.ndarray, tuple[int, ...], tuple[int, ...]] | None:
    """The site's gradient for argument `index` with a random upstream, that upstream, and
    the output and input shapes; None when the site cannot give one."""
    if site.decorated is None:
        return None
    tf, args, x = _with_tensor_at(args, index)
    try:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = site.decorated(*args, **(kwargs or {}))
        if not isinstance(y, tf.Tensor):
            return None
        upstream = np.random.default_rng(upstream_seed).standard_normal(tuple(y.shape))
        grad = tape.gradient(y, x, output_gradients=tf.constant(upstream, y.dtype))
    except Exception:
        return None
    if grad is None:
        return None
    return as_array(grad), upstream, tuple(y.shape), tuple(x.shape)


def lacks_forward_mode(site: Site, args: list[Any], index: int,
                       kwargs: dict[str, Any] | None = None) -> bool:
    """Whether forward mode gives no JVP (None) through the site for argument `index` where
    reverse mode gives a gradient (forward and grad_fn both outside TensorFlow)."""
    if site.decorated is None:
        return False
    tf, args, x = _with_tensor_at(args, index)
    try:
        with tf.autodiff.ForwardAccumulator(x, tf.ones_like(x)) as accumulator:
            y = site.decorated(*args, **(kwargs or {}))
            jvp = accumulator.jvp(y) if isinstance(y, tf.Tensor) else None
        if jvp is not None or not isinstance(y, tf.Tensor):
            return False
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = site.decorated(*args, **(kwargs or {}))
        return tape.gradient(y, x) is not None
    except Exception:
        return False


def forward_jacobian(site: Site, args: list[Any], index: int, out_shape: tuple[int, ...],
                     kwargs: dict[str, Any] | None = None) -> tuple[np.ndarray | None, float]:
    """The true Jacobian of the site's forward by central differences, in float64 when the
    forward accepts it; and the relative precision to compare it with."""
    tf = tensorflow()
    x = np.asarray(args[index], dtype=np.float64)
    if x.size > FORWARD_JACOBIAN_SIZE:
        return None, 0.0
    for dtype in dict.fromkeys(("float64", tf.convert_to_tensor(args[index]).dtype.name)):
        h = differences.step_sizes(x, dtype)

        def value(point: np.ndarray, dtype: str = dtype) -> np.ndarray:
            moved = list(args)
            moved[index] = tf.constant(point, dtype)
            return np.asarray(site.forward(*moved, **(kwargs or {}))[0], dtype=np.float64)

        try:
            columns = []
            for j in range(x.size):
                step = np.zeros(x.size)
                step[j] = h.flat[j]
                columns.append((value(x + step.reshape(x.shape)) - value(x - step.reshape(
                    x.shape))) / (2 * h.flat[j]))
        except Exception:
            continue
        return (np.stack(columns, axis=-1).reshape(out_shape + x.shape),
                tolerances.tolerance_for(dtype).rtol)
    return None, 0.0


def eager_call(call: Callable[[], Any]) -> None:
    """Run `call` once with tf.functions eager; its errors are not ours to report."""
    with functions_eager(True), contextlib.suppress(Exception):
        call()


def traced(function: Callable[..., Any]) -> Callable[..., Any]:
    """The function inside a tf.function (graph mode), under its own name."""
    wrapped = tensorflow().function(function)
    wrapped.__name__ = getattr(function, "__name__", "f")
    return wrapped
