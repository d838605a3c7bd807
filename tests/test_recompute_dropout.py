"""Dropout inside tf.recompute_grad: the nondeterminism finding says the known pitfall (the
backward pass draws a new mask) at the dropout's line, with the fix; a stateless dropout with
a fixed seed in the same block passes, and dropout outside tf.recompute_grad is only random."""

from __future__ import annotations

import pytest

import gradcheck
from gradcheck.report import CheckResult, Report

from .conftest import fixture_module

PITFALL = "is inside tf.recompute_grad, whose backward pass runs it again and draws a new mask"


@pytest.fixture(scope="module")
def recompute():  # type: ignore[no-untyped-def]
    return fixture_module("recompute_dropout")


def _nondeterminism(report: Report) -> CheckResult:
    [found] = [c for c in report.checks if c.check == "nondeterminism"]
    return found


@pytest.mark.parametrize(("loss", "line"), [("ffn_loss", 22), ("block_loss", 37),
                                            ("block64_loss", 64)])
def test_dropout_in_recompute_grad_is_named_as_the_pitfall(recompute, loss, line) -> None:  # type: ignore[no-untyped-def]
    report = gradcheck.check(getattr(recompute, loss), *getattr(recompute, f"{loss}_inputs"),
                             compiled=False)
    found = _nondeterminism(report)
    assert found.status == "fail"
    assert str(found.location).endswith(f"recompute_dropout.py:{line}")
    assert PITFALL in found.message
    assert f"recompute_dropout.py:{line} is inside tf.recompute_grad" in found.message
    assert "stateless_dropout with a seed argument" in found.message


def test_a_seeded_loss_whose_recomputation_draws_again_is_named(recompute) -> None:  # type: ignore[no-untyped-def]
    report = gradcheck.check(recompute.seeded_loss, *recompute.seeded_loss_inputs,
                             compiled=False)
    found = _nondeterminism(report)
    assert found.status == "fail" and found.input == "x"
    assert str(found.location).endswith("recompute_dropout.py:37")
    assert "not bitwise equal" in found.message and PITFALL in found.message
    assert "a grad_fn that draws noise" not in found.message


def test_dropout_in_recompute_grad_under_a_tf_function_is_named(recompute) -> None:  # type: ignore[no-untyped-def]
    report = gradcheck.check(recompute.compiled_block_loss,
                             *recompute.compiled_block_loss_inputs, compiled=False)
    found = _nondeterminism(report)
    assert found.status == "fail"
    assert str(found.location).endswith("recompute_dropout.py:37")
    assert PITFALL in found.message and "no op in its traced VJP" not in found.message


def test_a_stateless_seeded_dropout_in_recompute_grad_passes(recompute) -> None:  # type: ignore[no-untyped-def]
    report = gradcheck.check(recompute.stateless_loss, *recompute.stateless_loss_inputs,
                             compiled=False)
    assert report.ok
    assert not any(PITFALL in c.message for c in report.checks)


def test_dropout_outside_recompute_grad_is_random_but_no_pitfall(recompute) -> None:  # type: ignore[no-untyped-def]
    found = _nondeterminism(gradcheck.check(recompute.plain_loss, *recompute.plain_loss_inputs,
                                            compiled=False))
    assert found.status == "fail" and "recompute_grad" not in found.message
