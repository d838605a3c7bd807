"""Several kinks at one point: each output's kink is attributed to the op that output is
computed from, at its own line (a tf.reduce_max tie is the reduce_max's, not a MaxPool's on the
next line), and worded as a tie for the maximum (fixtures/kink_sites.py)."""

from __future__ import annotations

import pytest

import gradcheck
from gradcheck.evidence.gradients import Kink
from gradcheck.report import Kind, Report, Status
from tests.conftest import fixture_module


def _check(name: str) -> Report:
    module = fixture_module("kink_sites")
    return gradcheck.check(getattr(module, name), *getattr(module, f"{name}_inputs"),
                           compiled=False)


def _kinks(report: Report) -> dict[str, tuple[str, int, float, float]]:
    found = {}
    for result in report.checks:
        if result.check == Kind.KINK:
            evidence = result.evidence
            assert result.status == Status.WARN and isinstance(evidence, Kink)
            assert evidence.site is not None and evidence.site.location is not None
            assert result.location == evidence.site.location
            found[str(result.output)] = (evidence.site.name.split(" ")[0],
                                         evidence.site.location.line, evidence.autodiff,
                                         evidence.across)
    return found


def test_each_output_s_tie_is_named_at_its_own_op_and_line() -> None:
    report = _check("reduce_and_pool")
    assert report.ok
    kinks = _kinks(report)
    assert set(kinks) == {"y[0]", "y[1]"}
    assert kinks["y[0]"][:2] == ("Max", 15)  # b = tf.reduce_max(a)
    assert kinks["y[1]"][:2] == ("MaxPool", 16)  # b2 = tf.nn.max_pool(...)
    # reduce_max splits the gradient over its three tied elements; max_pool gives one all of it.
    assert kinks["y[0]"][2] == pytest.approx(1 / 3, rel=1e-5)
    assert kinks["y[1]"][2] == pytest.approx(1.0)
    said = {c.output: c.message for c in report.checks if c.check == Kind.KINK}
    assert "the kink: Max where two of the elements it reduces tie for the maximum" in said[
        "y[0]"]
    assert "the kink: MaxPool where two of the elements it reduces tie for the maximum" in said[
        "y[1]"]


def test_a_keras_max_pool_tie_is_the_pool_s_and_a_split_tie_is_no_kink() -> None:
    report = _check("pool_and_reduce")
    kinks = _kinks(report)
    # reduce_max gives each of two tied elements 1/2, as central differences across the tie do.
    assert list(kinks) == ["y[0]"]
    assert kinks["y[0]"][:2] == ("MaxPool", 28)


def test_away_from_ties_there_is_no_kink() -> None:
    report = _check("untied")
    assert report.ok and all(c.status == Status.PASS for c in report.checks)


def test_repeated_eigenvalues_are_eigh_s_kink_and_its_vectors_jump() -> None:
    """tensorflow#12853: at diag(2, 2, 1) both findings name tf.linalg.eigh's line and say the
    eigenvalues coincide, not a branch cut of a complex function."""
    report = _check("eigh_repeated")
    found = {str(c.output): c for c in report.checks if c.check == Kind.KINK}
    assert set(found) == {"y[0]", "y[1]"}
    for result in found.values():
        assert result.status == Status.WARN
        assert str(result.location).endswith("kink_sites.py:46")
        assert "SelfAdjointEigV2" in result.message
        assert "two of its eigenvalues coincide" in result.message
    assert "branch cut" not in found["y[1]"].message
    assert "not unique" in found["y[1]"].message
