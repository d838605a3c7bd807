"""The accumulation check: real training losses split into K micro-batches, their gradients
accumulated as a loop (or Keras' gradient_accumulation_steps) does, against the whole batch's."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck.errors import InputError
from gradcheck.kinds.accumulation.judging import judge_accumulation
from gradcheck.options import OptionError

from .conftest import fixture_module, fixture_target


@pytest.fixture(scope="module")
def losses():  # type: ignore[no-untyped-def]
    return fixture_module("gradient_accumulation")


def _accumulation(losses, name: str, k: int = 2):  # type: ignore[no-untyped-def]
    report = gradcheck.check(getattr(losses, name), *getattr(losses, f"{name}_inputs"),
                             accumulate=k, wrt="variables", compiled=False, mode="fast")
    [found] = [c for c in report.checks if c.check == "accumulation"]
    return found


@pytest.mark.parametrize(("name", "status", "words"), [
    ("mean_loss", "pass", "without dividing by 2 applies 2 times"),
    ("summed_loss", "fail", "is 1/2 of the whole batch's: f sums over its batch"),
    ("masked_loss", "fail", "divide each micro-batch's summed loss by the whole batch's count"),
    ("batch_norm_loss", "fail", "BatchNormalization computes its statistics per micro-batch"),
])
def test_accumulated_micro_batches_are_judged_against_the_whole_batch(
        losses, name: str, status: str, words: str) -> None:  # type: ignore[no-untyped-def]
    found = _accumulation(losses, name)
    assert found.status == status and words in found.message, found.message


def test_a_summed_loss_accumulates_to_half_over_two_micro_batches(losses) -> None:  # type: ignore[no-untyped-def]
    assert _accumulation(losses, "summed_loss").max_rel_err == pytest.approx(0.5, abs=1e-4)


@pytest.mark.parametrize(("k", "words"), [
    (3, "a batch of 8 does not split evenly over 3 micro-batches"),
    (9, "a batch of 8 cannot feed 9 micro-batches"),
])
def test_micro_batches_that_cannot_split_the_batch_are_input_errors(
        losses, k: int, words: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match=words):
        _accumulation(losses, "mean_loss", k)


def test_zero_micro_batches_is_exit_2_in_one_line(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli(["check", fixture_target("gradient_accumulation", "mean_loss"),
                      "--accumulate", "0"])
    assert result.exit_code == 2 and "--accumulate must be at least 1, got 0" in result.output
    with pytest.raises(OptionError):
        gradcheck.check(lambda x: x, 1.0, accumulate=0)


def test_the_accumulated_mean_is_named_by_its_ratio() -> None:
    whole = [np.array([1.0, 2.0])]
    assert judge_accumulation(whole, [whole, whole], "float32")[0] == "same"
    assert judge_accumulation(whole, [[whole[0] / 2]] * 2, "float32")[0] == "sum"
    assert judge_accumulation(whole, [[whole[0] * 3]] * 2, "float32")[0] == "different"
