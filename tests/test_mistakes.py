"""Naming grad_fn mistakes from numbers (no TensorFlow), and the annotation renderer."""

from __future__ import annotations

import numpy as np

from gradcheck.evidence import Location
from gradcheck.forensics.site_lines import return_location
from gradcheck.numerics.mistakes import shape_mistake, value_mistake
from gradcheck.render.annotations import render_github_annotations
from gradcheck.report import CheckResult, Report

J = np.array([[1.0, 2.0], [-3.0, 0.5]])


def test_value_mistakes_are_named() -> None:
    assert value_mistake(-J, J, 2, 1, "y").what == "has the wrong sign: it returns -uᵀJ"
    assert value_mistake(2 * J, J, 2, 1, "y").what == "is off by a constant factor of 2"
    assert value_mistake(J.T, J, 2, 1, "y").what.startswith("uses J where Jᵀ is needed")
    assert value_mistake(np.zeros((2, 2)), J, 2, 2, "y[1]").what.startswith(
        "ignores the upstream of y[1]")
    same_rows = np.array([[-2.0, 2.5], [-2.0, 2.5]])
    assert value_mistake(same_rows, J, 2, 1, "y").what.startswith(
        "gives every output element the same gradient row: it sums the upstream")
    assert value_mistake(J + np.array([[0.0, 0.1], [0.0, 0.0]]), J, 2, 1, "y").what == (
        "returns wrong values")


def test_upstream_mistakes_carry_their_fix() -> None:
    summed = value_mistake(np.array([[-2.0, 2.5], [-2.0, 2.5]]), J, 2, 1, "y")
    assert summed.mistake == "summed-upstream" and "upstream * dy/dx" in (summed.fix or "")
    ignored = value_mistake(np.zeros((2, 2)), J, 2, 2, "y[1]")
    assert ignored.mistake == "ignored-upstream" and "y[1]" in (ignored.fix or "")


def test_a_symmetric_jacobian_is_never_called_transposed() -> None:
    symmetric = np.array([[2.0, 1.0], [1.0, 3.0]])
    assert value_mistake(symmetric * 1.0001, symmetric, 2, 1, "y", rtol=1e-3).mistake != (
        "transposed")
    assert value_mistake(np.diag([0.8776, 0.5403]) * 1.0001, np.diag([0.8776, 0.5403]), 2, 1,
                         "y", rtol=1e-3).mistake == "wrong-values"


def test_shape_mistakes_are_named() -> None:
    u = np.array([0.5, -2.0])

    def named(grad: np.ndarray, upstream: np.ndarray, jacobian: np.ndarray,
              in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> str:
        return shape_mistake(grad, upstream, jacobian, in_shape, out_shape).what

    assert named(J, u, J, (2,), (2,)) == "returned the full Jacobian J"
    assert named(J * u, u, J, (2,), (2,)).startswith("returned J * upstream")
    assert named(u[:, None] * J, u, J, (2,), (2,)).startswith(
        "scaled the Jacobian's rows by u")
    assert named(np.float64(1.0) * np.ones(()), u, J, (2,), (2,)) == (
        "returned a scalar (a summed result)")
    tall = np.ones((3, 2))
    assert named(tall.T, np.ones(3), tall, (2,), (3,)) == (
        "returned a transposed-Jacobian-shaped tensor")


def test_transposed_jacobian_times_upstream_gets_the_contraction_as_its_fix() -> None:
    """The seed question's grad_fn: dg = Jᵀ, returned dg * upstream; the fix sums axis -1."""
    u = np.array([0.5, -2.0])
    mistake = shape_mistake(J.T * u, u, J, (2,), (2,))
    assert mistake.what.startswith("returned Jᵀ * upstream")
    assert "tf.linalg.matvec(that matrix, upstream)" in (mistake.fix or "")
    np.testing.assert_allclose((J.T * u).sum(axis=-1), u @ J)
    # Near the true J only within float32 precision: still named with rtol 1e-3.
    noisy = J * (1 + 1e-5)
    assert shape_mistake(noisy, u, J, (2,), (2,), rtol=1e-3).what == (
        "returned the full Jacobian J")
    assert shape_mistake(noisy, u, None, (2,), (2,)).what.startswith(
        "returned a Jacobian-shaped tensor")


def test_return_location_finds_the_single_return() -> None:
    def grad_fn(upstream):  # type: ignore[no-untyped-def]
        def helper():  # type: ignore[no-untyped-def]
            return 1

        return upstream * helper()

    location = return_location(grad_fn)
    assert location is not None
    line = grad_fn.__code__.co_firstlineno + 4
    assert str(location).endswith(f"test_mistakes.py:{line}")


def test_annotations_escape_and_dedupe() -> None:
    report = Report("t:f", (), (), (
        CheckResult("graph-break", "fail", "100% cut\nhere", location=Location("pkg/m.py", 7)),
        CheckResult("connected", "fail", "same place", location=Location("pkg/m.py", 7)),
        CheckResult("jacobian", "pass", "fine", location=Location("pkg/m.py", 9)),
    ))
    assert render_github_annotations(report) == (
        "::error file=pkg/m.py,line=7,title=gradcheck graph-break::100%25 cut%0Ahere")
