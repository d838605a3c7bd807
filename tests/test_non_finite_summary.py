"""The reductions a caught step's diagnosis computes inside the traced graph instead of
fetching a model's gradients: each tensor's non-finite elements described as NumPy would, and
a fix trial's "all finite" and largest |gradient|."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck.forensics.finite_flags import finite_and_largest, finite_flags
from gradcheck.forensics.non_finite_summary import SMALLEST_SUMMARISED, read_summaries


def _arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    size = SMALLEST_SUMMARISED * 3
    nan_late = rng.normal(size=(size // 4, 4)).astype("float32")
    nan_late[500, 2] = np.nan
    nan_late[600, 1] = np.inf
    negative = rng.normal(size=(size,)).astype("float64")
    negative[[7, 9]] = -np.inf
    positive = rng.normal(size=(3, size // 3)).astype("float16")
    positive[2, 5] = -np.inf
    positive[1, 1] = np.inf
    return [nan_late, negative, positive, rng.normal(size=(size,)).astype("float32")]


def _traced(function, arrays, unknown_shapes=False):
    """function(*tensors) added to a graph of the arrays and run, as the diagnosis runs its
    reductions (their ops are imported in TensorFlow's C API: a function made of the graph's
    ops up to them, not a tf.function's outputs)."""
    import tensorflow as tf

    from gradcheck.forensics.subgraphs import computed

    signature = [tf.TensorSpec(None if unknown_shapes else a.shape, a.dtype) for a in arrays]
    tensors: list = []
    graph = tf.compat.v1.wrap_function(
        lambda *given: tensors.extend(tf.identity(t) for t in given) or tensors, signature).graph
    with graph.as_default():
        ends = function(*tensors)
    return computed(list(graph.inputs), [tf.constant(a) for a in arrays], list(ends))


def test_each_summary_describes_the_non_finite_elements_as_numpy_does() -> None:
    arrays = _arrays()
    kept = []

    def summarised(*tensors):
        kept[:] = tensors
        return finite_flags(tensors, tensors)

    flags, summaries = _traced(summarised, arrays)
    found = read_summaries(kept, summaries)
    assert np.asarray(flags).tolist() == [bool(np.all(np.isfinite(a))) for a in arrays]
    for tensor, array in zip(kept, arrays):
        summary = found[tensor.name]
        bad = ~np.isfinite(array)
        assert summary.count == int(bad.sum()) and summary.size == array.size
        if bad.any():
            first = np.unravel_index(int(np.argmax(bad.reshape(-1))), array.shape)
            assert summary.first == tuple(int(i) for i in first)
            expected = "NaN" if np.isnan(array).any() else \
                "inf" if (array[np.isinf(array)] > 0).any() else "-inf"
            assert summary.produced == expected


@pytest.mark.parametrize("unknown_shapes", [False, True])
@pytest.mark.parametrize("broken", [False, True])
def test_a_trial_reduces_to_all_finite_and_the_largest_gradient(broken: bool,
                                                                unknown_shapes: bool) -> None:
    rng = np.random.default_rng(1)
    loss = np.float32(2.5)
    gradients = [rng.normal(size=(40, 30)).astype("float32") * 7,
                 rng.normal(size=(5,)).astype("float64"), np.zeros((0,), "float32"),
                 (rng.normal(size=(6,)) + 1j * rng.normal(size=(6,))).astype("complex64")]
    gradients[1][3] = -900.0
    if broken:
        gradients[0][4, 4] = np.nan

    finite, largest = _traced(lambda out, *grads: finite_and_largest([out], grads),
                              [loss, *gradients], unknown_shapes)
    assert bool(finite) is not broken
    if not broken:
        assert float(largest) == max(float(np.max(np.abs(g))) for g in gradients if g.size)


@pytest.mark.parametrize("unknown_shapes", [False, True])
def test_each_flag_is_whether_numpy_finds_every_element_finite(unknown_shapes: bool) -> None:
    """One op per tensor (tfdbg's health summary): a finite tensor whose sum would overflow
    stays finite; -inf, +inf and NaN in any float dtype, a complex part, are not."""
    huge = np.full((64, 64), 3e38, "float32")  # its sum is +inf in float32
    minus = np.ones((3, 4), "float64")
    minus[2, 3] = -np.inf
    half = np.array([1.0, 60000.0, -60000.0], "float16")
    half_bad = np.array([1.0, np.inf], "float16")
    complex_bad = np.array([1 + 1j, 2 + np.nan * 1j], "complex64")
    complex_good = np.array([1 + 1j, 3e38 + 3e38j], "complex64")
    arrays = [huge, minus, half, half_bad, np.zeros((0, 3), "float32"), complex_bad,
              complex_good, np.array(np.nan, "float32"), *_arrays()]
    made: list = []

    def flagged(*tensors):
        found = finite_flags(tensors)
        made.extend(found[0].c_ops)
        return found

    flags, _ = _traced(flagged, arrays, unknown_shapes)
    assert np.asarray(flags).tolist() == [bool(np.all(np.isfinite(a))) for a in arrays]
    # One op per real tensor (before: two, three at an unknown rank), three to gather the
    # flags, and a complex one's: its parts' flags (and a reshape at an unknown rank), its
    # health row made of them.
    complex_ops = (3 if unknown_shapes else 2) + 4 + 3
    assert len(made) == len(arrays) - 2 + 3 + 2 * complex_ops, len(made)
