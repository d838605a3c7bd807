"""Central differences with Richardson extrapolation, error estimates, kinks, comparisons."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from gradcheck.numerics import differences, judging, tolerances


def fd_of(function: Callable[[np.ndarray], np.ndarray], x: np.ndarray,
          dtype: str = "float64") -> differences.FiniteDifference:
    h = differences.step_sizes(x, dtype)
    points = differences.perturbed_points(x, h, 0, x.size)
    evaluations = np.stack([function(p.astype(dtype)).astype(np.float64) for p in points])
    return differences.finite_difference(evaluations, function(x.astype(dtype)), h, dtype)


def smooth(x: np.ndarray) -> np.ndarray:
    return np.stack([np.sin(x[0]) * np.exp(x[1]), x[0] ** 3 / (1.0 + x[1] ** 2)])


def smooth_jacobian(x: np.ndarray) -> np.ndarray:
    a, b = x
    return np.array([
        [np.cos(a) * np.exp(b), np.sin(a) * np.exp(b)],
        [3 * a**2 / (1 + b**2), -2 * a**3 * b / (1 + b**2) ** 2],
    ])


def test_float64_accuracy_beats_1e_9_relative() -> None:
    x = np.array([0.7, -1.3])
    fd = fd_of(smooth, x)
    exact = smooth_jacobian(x)
    relative = np.max(np.abs(fd.jacobian - exact) / np.abs(exact))
    assert relative < 1e-9
    # The error estimate is honest: it bounds the real error.
    assert np.all(np.abs(fd.jacobian - exact) <= tolerances.ERROR_ESTIMATE_SAFETY
                  * fd.error_estimate + 1e-15)
    assert not fd.kink.any()


def test_float32_accuracy_and_estimate() -> None:
    x = np.array([0.7, -1.3])
    fd = fd_of(smooth, x, "float32")
    exact = smooth_jacobian(x)
    assert np.max(np.abs(fd.jacobian - exact) / np.abs(exact)) < 1e-3
    tolerance = tolerances.tolerance_for("float32")
    assert judging.compare(exact, fd.jacobian, tolerance, fd.error_estimate).ok


def test_kink_of_abs_and_relu_at_zero_is_flagged() -> None:
    x = np.array([0.0, 2.0])
    fd = fd_of(lambda v: np.maximum(v, 0.0), x)
    assert fd.kink[0, 0] and not fd.kink[1, 1]
    fd_abs = fd_of(np.abs, np.array([0.0]))
    assert fd_abs.kink[0, 0]


def test_steps_scale_with_the_element() -> None:
    h = differences.step_sizes(np.array([0.0, 1e4]), "float64")
    assert h[1] / h[0] > 9e3
    assert differences.step_sizes(np.array([3.0]), "float64", eps=1e-3)[0] > 2.9e-3


def test_compare_reports_worst_element() -> None:
    expected = np.array([[1.0, 2.0], [3.0, 4.0]])
    actual = expected.copy()
    actual[1, 0] = 3.5
    result = judging.compare(actual, expected, tolerances.tolerance_for("float64"))
    assert not result.ok and result.worst_index == (1, 0) and result.n_bad == 1
    assert result.max_abs_err == 0.5
    # Relative to the block's scale (max |expected| = 4), not elementwise.
    assert abs(result.max_rel_err - 0.5 / 4.0) < 1e-12
    allowed = 1e-8 + 1e-6 * 3.0
    assert abs(result.excess - 0.5 / allowed) < 1e-6 * result.excess


def test_relative_error_is_against_the_block_scale_not_noise_entries() -> None:
    """Entries that are both ~1e-11 noise must not read as a 100% error next to a pass."""
    expected = np.array([[2.0, 1e-11], [3.0, -2e-11]])
    actual = np.array([[2.0, -1e-11], [3.0, 3e-11]])
    result = judging.compare(actual, expected, tolerances.tolerance_for("float64"))
    assert result.ok
    assert result.max_rel_err == pytest.approx(5e-11 / 3.0)
    assert result.excess < 0.01


def test_contract_is_u_transpose_j() -> None:
    jacobian = np.array([[0.0, 1.0], [2.0, 0.0]])
    assert judging.contract(np.array([1.0, 3.0]), jacobian).tolist() == [6.0, 1.0]


def test_tolerance_defaults_and_overrides() -> None:
    assert tolerances.tolerance_for("float64") == tolerances.Tolerance(atol=1e-8, rtol=1e-6)
    assert tolerances.tolerance_for("float32", rtol=0.1).rtol == 0.1
