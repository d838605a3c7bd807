"""Naming grad_fn mistakes from numbers (no TensorFlow), and the annotation renderer."""

from __future__ import annotations

import numpy as np

from gradcheck.custom_gradient_checks import shape_diagnosis, value_diagnosis
from gradcheck.instrument import return_location
from gradcheck.render.annotations import render_github_annotations
from gradcheck.report import CheckResult, Report

J = np.array([[1.0, 2.0], [-3.0, 0.5]])


def test_value_mistakes_are_named() -> None:
    assert value_diagnosis(-J, J, 2, 1, "y") == "has the wrong sign: it returns -uᵀJ"
    assert value_diagnosis(2 * J, J, 2, 1, "y") == "is off by a constant factor of 2"
    assert value_diagnosis(J.T, J, 2, 1, "y").startswith("uses J where Jᵀ is needed")
    assert value_diagnosis(np.zeros((2, 2)), J, 2, 2, "y[1]").startswith(
        "ignores the upstream of y[1]")
    same_rows = np.array([[-2.0, 2.5], [-2.0, 2.5]])
    assert value_diagnosis(same_rows, J, 2, 1, "y").startswith(
        "gives every output element the same gradient row: it sums the upstream")
    assert value_diagnosis(J + np.array([[0.0, 0.1], [0.0, 0.0]]), J, 2, 1, "y") == (
        "returns wrong values")


def test_shape_mistakes_are_named() -> None:
    u = np.array([0.5, -2.0])
    assert shape_diagnosis(J, u, J, (2,), (2,)) == "returned the full Jacobian J"
    assert shape_diagnosis(J * u, u, J, (2,), (2,)).startswith("returned J * upstream")
    assert shape_diagnosis(u[:, None] * J, u, J, (2,), (2,)).startswith(
        "scaled the Jacobian's rows by u")
    assert shape_diagnosis(np.float64(1.0) * np.ones(()), u, J, (2,), (2,)) == (
        "returned a scalar (a summed result)")
    tall = np.ones((3, 2))
    assert shape_diagnosis(tall.T, np.ones(3), tall, (2,), (3,)) == (
        "returned a transposed-Jacobian-shaped tensor")


def test_return_location_finds_the_single_return() -> None:
    def grad_fn(upstream):  # type: ignore[no-untyped-def]
        def helper():  # type: ignore[no-untyped-def]
            return 1

        return upstream * helper()

    location = return_location(grad_fn)
    assert location is not None
    line = grad_fn.__code__.co_firstlineno + 4
    assert location.endswith(f"test_custom_gradient_checks.py:{line}")


def test_annotations_escape_and_dedupe() -> None:
    report = Report("t:f", (), (), (
        CheckResult("graph-break", "fail", "100% cut\nhere", location="pkg/m.py:7"),
        CheckResult("connected", "fail", "same place", location="pkg/m.py:7"),
        CheckResult("jacobian", "pass", "fine", location="pkg/m.py:9"),
    ))
    assert render_github_annotations(report) == (
        "::error file=pkg/m.py,line=7,title=gradcheck graph-break::100%25 cut%0Ahere")
