"""Central differences with Richardson extrapolation, error estimates, kinks, comparisons."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest

from gradcheck.numerics import differences, judging, projections, tolerances


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


def test_richardson_of_central_quotients_cancels_the_h_squared_term() -> None:
    x, h = 0.7, 1e-3
    d1 = differences.central_quotient(np.sin(x + h), np.sin(x - h), h)
    d2 = differences.central_quotient(np.sin(x + 2 * h), np.sin(x - 2 * h), 2 * h)
    extrapolated, estimate = differences.extrapolate(d1, d2, 0.0)
    assert abs(d1 - np.cos(x)) > 1e-8  # O(h²)
    assert abs(extrapolated - np.cos(x)) < 1e-12  # O(h⁴)
    # |D(h) - D(2h)| is 3 times D(h)'s truncation: a safe bound on the extrapolant's error.
    assert abs(extrapolated - np.cos(x)) < estimate < 4 * abs(d1 - np.cos(x))


def test_rounding_error_and_second_difference() -> None:
    assert differences.rounding_error(1e-16, 1e-4, 1.0, 3.0) == pytest.approx(4e-12)
    # x² about 1 with h = 0.1: 2h² where smooth; |x| about 0: the slope's jump (2) times h.
    assert differences.second_difference(1.1**2, 1.0, 0.9**2) == pytest.approx(0.02)
    assert differences.second_difference(0.1, 0.0, 0.1) == pytest.approx(0.2)


def test_a_projection_blames_only_a_self_inconsistent_discrepancy_on_a_kink() -> None:
    assert differences.crossed_kink(1.0, 0.2)
    assert not differences.crossed_kink(1.0, 0.05)
    assert differences.crossed_kink(float("nan"), 1.0)  # NaN is retried, never waved through


def _along(function: Callable[[np.ndarray], np.ndarray], x: np.ndarray, u: np.ndarray,
           d: np.ndarray) -> Callable[[float], tuple[float, float]]:
    """⟨u, f(x + step·d)⟩ and Σ|u||f| there, as fast mode measures them."""
    def along(step: float) -> tuple[float, float]:
        values = function(x + step * d)
        return float(np.vdot(u, values)), projections.abs_inner(u, values)
    return along


def _projection(function: Callable[[np.ndarray], np.ndarray], gradient: np.ndarray,
                x: np.ndarray, u: np.ndarray, d: np.ndarray) -> projections.Projection:
    allowed = projections.allowance([(gradient, d)], [u], tolerances.tolerance_for("float64"))
    step = tolerances.machine_eps("float64") ** (1.0 / 3.0)
    return projections.project(_along(function, x, u, d), float(np.vdot(u, function(x))), step,
                               tolerances.machine_eps("float64"), allowed)


RNG = np.random.default_rng(0)
X, U, D = RNG.normal(size=50), RNG.choice([-1.0, 1.0], 50), RNG.choice([-1.0, 1.0], 50)


def test_a_projection_of_a_correct_gradient_passes_and_of_a_wrong_one_fails() -> None:
    right = _projection(np.sin, U * np.cos(X), X, U, D)
    assert right.ok and not right.extrapolated and right.error < 1e-8
    wrong_gradient = U * np.cos(X)
    wrong_gradient[7] *= 2.0
    wrong = _projection(np.sin, wrong_gradient, X, U, D)
    assert not wrong.ok and wrong.extrapolated
    assert wrong.error == pytest.approx(abs(U[7] * np.cos(X[7]) * D[7]), rel=1e-6)


def test_a_kink_crossed_by_the_step_is_stepped_inside() -> None:
    x = X.copy()
    x[3] = 6e-7  # a tenth of the default step from ReLU's kink
    relu = lambda v: np.maximum(v, 0.0)  # noqa: E731
    gradient = U * (x > 0)
    default = tolerances.machine_eps("float64") ** (1.0 / 3.0)
    allowed = projections.allowance([(gradient, D)], [U], tolerances.tolerance_for("float64"))
    along, centre = _along(relu, x, U, D), float(np.vdot(U, relu(x)))
    first = projections.measure(along, centre, default, tolerances.machine_eps("float64"),
                                allowed)
    assert not first.ok and differences.crossed_kink(first.error, first.inconsistency)
    result = _projection(relu, gradient, x, U, D)
    assert result.ok and result.step in [default / s for s in
                                         differences.PROJECTION_SMALLER_STEPS]


def test_the_rest_of_a_projection_is_deduced_from_the_whole_and_a_part() -> None:
    gradient = U * np.cos(X)
    gradient[[10, 30]] += 1.0  # the whole and both halves fail: all extrapolated
    tolerance = tolerances.tolerance_for("float64")
    step, eps = tolerances.machine_eps("float64") ** (1.0 / 3.0), tolerances.machine_eps("float64")

    def allowed(start: int, stop: int) -> projections.Allowance:
        return projections.allowance([(gradient[start:stop], D[start:stop])], [U], tolerance)

    def measured(start: int, stop: int) -> projections.Projection:
        d = np.zeros_like(D)
        d[start:stop] = D[start:stop]
        return projections.measure(_along(np.sin, X, U, d), float(np.vdot(U, np.sin(X))), step,
                                   eps, allowed(start, stop))

    whole, left, right = measured(0, 50), measured(0, 25), measured(25, 50)
    assert whole.extrapolated and left.extrapolated and not right.ok
    deduced = projections.remainder(whole, left, lambda: allowed(25, 50))
    assert deduced is not None and not deduced.ok
    assert deduced.autodiff == pytest.approx(right.autodiff)
    assert deduced.finite_difference == pytest.approx(right.finite_difference, abs=1e-8)
    plain = dataclasses.replace(left, extrapolated=False)
    assert projections.remainder(whole, plain, lambda: allowed(25, 50)) is None
