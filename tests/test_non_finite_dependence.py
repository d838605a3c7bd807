"""No finding built on non-finite values: once f's own value is found NaN or infinite, a
connected, jacobian or vjp finding whose evidence is finite differences of those values (a
dependence "up to nan") has no verdict, at the non-finite finding's line, and no search for a
cut stands on it; a cut whose finite differences are finite elsewhere keeps its finite slope
(fixtures/non_finite_dependence.py)."""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

import gradcheck
from gradcheck.evidence.diagnosis import CutNotFound
from gradcheck.evidence.gradients import CutPath
from gradcheck.evidence.non_finite import NoVerdictAtNonFinite
from gradcheck.report import Kind, Status
from tests.conftest import fixture_module

LOSS_LINE = 21


def test_labels_behind_a_comparison_of_an_infinite_loss_get_no_dependence_verdict() -> None:
    module = fixture_module("non_finite_dependence")
    report = gradcheck.check(module.focal_loss_fixed, *module.focal_loss_fixed_inputs)
    assert not report.ok
    [failed] = [c for c in report.checks if c.failed]
    assert failed.check == Kind.NON_FINITE
    assert failed.location is not None and failed.location.line == LOSS_LINE
    [connected] = [c for c in report.checks
                   if c.check == Kind.CONNECTED and c.input == "y_true"]
    assert connected.status == Status.SKIP
    assert isinstance(connected.evidence, NoVerdictAtNonFinite)
    assert connected.evidence.produced == "inf"
    assert connected.location == failed.location
    assert not [c for c in report.checks if c.input == "y_true" and c.status == Status.WARN
                and isinstance(c.evidence, CutNotFound)]
    said = str(report)
    assert "up to nan" not in said and "could not locate" not in said
    assert [c.status for c in report.checks if c.check == Kind.VJP and c.input == "y_true"] == [
        Status.SKIP]


def test_the_fixed_loss_is_finite_and_passes() -> None:
    module = fixture_module("non_finite_dependence")
    report = gradcheck.check(module.focal_loss_epsilon, *module.focal_loss_epsilon_inputs)
    assert report.ok
    assert not [c for c in report.checks if c.check == Kind.NON_FINITE]


def _scaled_root(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    return tf.sqrt(x) * tf.stop_gradient(y)


def test_a_cut_keeps_the_slope_finite_differences_see_where_f_is_finite() -> None:
    # sqrt(-1) is NaN in element 0; element 1 is 2 * y[1]: a slope of 2 that stop_gradient cuts.
    report = gradcheck.check(_scaled_root, np.array([-1.0, 4.0]), np.array([2.0, 3.0]),
                             compiled=False)
    [cut] = [c for c in report.checks if c.check == Kind.CONNECTED and c.input == "y"]
    assert cut.status == Status.FAIL and isinstance(cut.evidence, CutPath)
    assert math.isclose(cut.evidence.magnitude, 2.0, rel_tol=1e-6)
    [located] = [c for c in report.checks if c.check == Kind.GRAPH_BREAK and c.input == "y"]
    assert located.status == Status.FAIL and located.location is not None
    assert "stop_gradient" in located.message
