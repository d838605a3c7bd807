"""The symmetric-matrix gradient convention: a warning with its numbers, never a false pass."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck.numerics.symmetric import (
    Directions,
    SymmetricProbe,
    is_square_matrix,
    symmetrise,
)
from gradcheck.numerics.tolerances import tolerance_for
from gradcheck.options import COMMAND_KINDS, CheckOptions
from gradcheck.pipeline import TargetRequest, check_request
from gradcheck.report import CheckResult, Report

from .conftest import FIXTURES, details, fixture_target

TOLERANCE = tolerance_for("float64")
# log det A at A = [[2, 1], [1, 2]]: the gradient is A⁻¹ = [[2, -1], [-1, 2]] / 3.
INVERSE = np.array([[2.0, -1.0], [-1.0, 2.0]]) / 3.0
# What an element-by-element difference sees: logdet reads the lower triangle only.
LOWER_READING = np.array([[2.0, 0.0], [-2.0, 2.0]]) / 3.0
# The natural-gradient example: dL/deta2 (symmetric part) and its lower-triangle reading.
DL_DETA2 = np.array([[-0.125, 0.75], [0.75, -0.5]])
DL_DETA2_ELEMENTWISE = np.array([[-0.125, 0.0], [1.5, -0.5]])


def run(name: str, function: str, command: str = "check", upstream: tuple[str, ...] = ()
        ) -> Report:
    request = TargetRequest(fixture_target(name, function), path=str(FIXTURES),
                            upstream_specs=upstream)
    return check_request(request, CheckOptions(kinds=COMMAND_KINDS[command]))


def only(report: Report, check: str, **where: str) -> CheckResult:
    found = [c for c in report.checks if c.check == check
             and all(getattr(c, k) == v for k, v in where.items())]
    assert len(found) == 1, report.checks
    return found[0]


def test_directions_pair_each_lower_element_with_its_mirror() -> None:
    directions = Directions.of((2, 2))
    assert directions.first.tolist() == [0, 2, 3]  # (0,0), (1,0), (1,1)
    assert directions.second.tolist() == [0, 1, 3]  # (0,0), (0,1), (1,1)
    assert [directions.index(d) for d in range(3)] == [(0, 0), (1, 0), (1, 1)]
    batched = Directions.of((2, 2, 2))
    assert batched.count == 6 and batched.first.tolist() == [0, 2, 3, 4, 6, 7]
    assert batched.index(4) == (1, 1, 0)


def test_projection_is_the_directional_derivative_along_e_ij_plus_e_ji() -> None:
    block = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert Directions.of((2, 2)).project(block).tolist() == [1.0, 5.0, 4.0]
    # An output axis in front is kept.
    assert Directions.of((2, 2)).project(np.stack([block, 10 * block])).tolist() == [
        [1.0, 5.0, 4.0], [10.0, 50.0, 40.0]]


def test_points_move_both_mirrored_elements_by_the_same_step() -> None:
    points = Directions.of((2, 2)).points(np.zeros((2, 2)), np.array([0.1, 0.2, 0.3]), 1, 2)
    assert points.shape == (4, 2, 2)
    assert points[0].tolist() == [[0.0, 0.2], [0.2, 0.0]]  # x + h (E_10 + E_01)
    assert points[3].tolist() == [[0.0, -0.4], [-0.4, 0.0]]  # x - 2h (E_10 + E_01)


def test_square_matrix_shapes() -> None:
    assert is_square_matrix((3, 3)) and is_square_matrix((4, 2, 2))
    assert not is_square_matrix((3,)) and not is_square_matrix((2, 3))
    assert not is_square_matrix((1, 1))
    assert symmetrise(np.array([[1.0, 2.0], [4.0, 3.0]])).tolist() == [[1.0, 3.0], [3.0, 3.0]]


def lower_reading_probe() -> SymmetricProbe:
    """f(X) = X[0,0]² + 3 X[1,0] at X = [[1, 5], [7, 2]]: it never reads X[0,1]."""
    x = np.array([[1.0, 5.0], [7.0, 2.0]])

    def evaluate(points: np.ndarray) -> list[np.ndarray]:
        return [points[:, 0, 0] ** 2 + 3.0 * points[:, 1, 0]]

    return SymmetricProbe(evaluate, x, np.full((2, 2), 1e-4), [("y", np.array(22.0), "float64")],
                          64)


def test_symmetric_part_of_a_lower_reading_gradient_is_the_convention() -> None:
    probe = lower_reading_probe()
    verdict = probe.judge_jacobian("y", np.array([[2.0, 1.5], [1.5, 0.0]]), TOLERANCE)
    assert verdict is not None and verdict.convention
    assert verdict.comparison.max_abs_err < 1e-8 and verdict.directions.count == 3


def test_transposed_or_scaled_gradients_are_not_the_convention() -> None:
    probe = lower_reading_probe()
    # Right along every symmetric direction, but not symmetric: not TensorFlow's convention.
    transposed = probe.judge_jacobian("y", np.array([[2.0, 3.0], [0.0, 0.0]]), TOLERANCE)
    assert transposed is not None and transposed.comparison.ok
    assert not transposed.autodiff_symmetric and not transposed.convention
    # Symmetric but half the true off-diagonal derivative: wrong along E_10 + E_01.
    halved = probe.judge_jacobian("y", np.array([[2.0, 0.75], [0.75, 0.0]]), TOLERANCE)
    assert halved is not None and not halved.convention
    assert halved.worst_index == (1, 0) and halved.comparison.max_abs_err == pytest.approx(1.5)


def test_vjp_is_judged_against_the_sum_of_contracted_symmetric_blocks() -> None:
    probe = lower_reading_probe()
    verdict = probe.judge_vjp(np.array([[4.0, 3.0], [3.0, 0.0]]), [np.array(2.0)], TOLERANCE)
    assert verdict is not None and verdict.convention


def test_logdet_through_cholesky_warns_with_the_symmetric_error() -> None:
    report = run("symmetric_ops", "logdet")
    assert report.ok and report.exit_code == 0
    jacobian = only(report, "jacobian", input="a")
    assert jacobian.status == "warn"
    np.testing.assert_allclose(details(jacobian)["autodiff"], INVERSE, atol=1e-12)
    np.testing.assert_allclose(details(jacobian)["finite_difference"], LOWER_READING, atol=1e-8)
    assert jacobian.max_rel_err is not None and jacobian.max_rel_err < 1e-8
    numbers = details(jacobian)["symmetric_perturbations"]
    assert numbers["directions"] == 3 and numbers["elementwise_mismatches"] == 2
    assert numbers["elementwise_max_abs_err"] == pytest.approx(1.0 / 3.0, abs=1e-8)
    assert "symmetric part (G + Gᵀ)/2" in jacobian.message
    assert "E_ij + E_ji of a" in jacobian.message and "Cholesky" in jacobian.message
    assert only(report, "vjp", input="a").status == "warn"


def test_batched_matrices_are_perturbed_one_matrix_at_a_time() -> None:
    report = run("symmetric_ops", "batched_logdet")
    jacobian = only(report, "jacobian", input="a")
    assert report.ok and jacobian.status == "warn"
    assert details(jacobian)["symmetric_perturbations"]["directions"] == 6
    second = np.linalg.inv(np.array([[4.0, 2.0], [2.0, 3.0]]))
    expected = np.zeros((2, 2, 2, 2))  # d logdet(A_b) / d A_c: zero unless b == c
    expected[0, 0], expected[1, 1] = INVERSE, second
    np.testing.assert_allclose(details(jacobian)["autodiff"], expected, atol=1e-12)


def test_eigvalsh_reads_and_differentiates_the_lower_triangle_so_nothing_to_excuse() -> None:
    report = run("symmetric_ops", "eigenvalues")
    assert report.ok
    assert all(c.status == "pass" for c in report.checks if c.check in ("jacobian", "vjp"))


def test_a_transposed_custom_gradient_still_fails() -> None:
    report = run("symmetric_ops", "transposed")
    assert not report.ok and report.exit_code == 1
    jacobian = only(report, "jacobian", input="a")
    assert jacobian.status == "fail"
    # d sum(W*A)/dA = W = [[1, 2], [3, 4]]; the grad_fn returns Wᵀ.
    assert details(jacobian)["autodiff"] == [[1.0, 3.0], [2.0, 4.0]]
    assert "autodiff is not symmetric" in jacobian.message
    assert only(report, "vjp", input="a").status == "fail"


def test_a_symmetric_but_wrong_gradient_still_fails() -> None:
    report = run("symmetric_ops", "halved_cholesky")
    jacobian = only(report, "jacobian", input="a")
    assert jacobian.status == "fail"
    assert "under symmetric perturbations E_ij + E_ji it still disagrees" in jacobian.message
    assert "× the allowed error), so this is not TensorFlow's" in jacobian.message


def test_natgrad_dl_deta2_is_the_symmetric_part_and_a_warning() -> None:
    report = run("natgrad", "expectation_to_meanvarsqrt", "vjp",
                 (str(FIXTURES / "natgrad_upstream.npz"),))
    assert report.ok and report.exit_code == 0
    vjp = only(report, "vjp", input="eta2")
    assert vjp.status == "warn"
    np.testing.assert_allclose(details(vjp)["vjp"], DL_DETA2, atol=1e-12)
    np.testing.assert_allclose(details(vjp)["finite_difference"], DL_DETA2_ELEMENTWISE, atol=1e-8)
    assert vjp.max_abs_err is not None and vjp.max_abs_err < 1e-8
    assert details(vjp)["symmetric_perturbations"]["elementwise_max_abs_err"] == pytest.approx(
        0.75, abs=1e-8)
    assert only(report, "jacobian", input="eta2", output="y['L']").status == "warn"
    # eta1 moves eta2 - eta1 eta1ᵀ symmetrically: no convention involved, a plain pass.
    assert only(report, "vjp", input="eta1").status == "pass"


def test_a_correct_custom_gradient_on_a_symmetric_matrix_is_no_false_alarm() -> None:
    # cholesky_custom's grad_fn returns TensorFlow's own gradient: the symmetric part.
    report = run("symmetric_ops", "cholesky_custom")
    assert report.ok and report.exit_code == 0
    assert not [c for c in report.checks if c.status in ("fail", "error")]
    site = only(report, "custom-gradient")
    assert site.status == "pass"
    assert site.message.startswith("custom_gradient cholesky_custom (line 57): grad_fn returns uᵀJ")
    jacobian = only(report, "jacobian", input="a")
    assert jacobian.status == "warn" and "symmetric part (G + Gᵀ)/2" in jacobian.message
    assert jacobian.max_rel_err is not None and jacobian.max_rel_err < 1e-8
    assert only(report, "vjp", input="a").status == "warn"
