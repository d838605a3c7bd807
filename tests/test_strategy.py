"""The strategy check: real distributed training losses under MirroredStrategy on two logical
CPU devices (a fresh `gradcheck check`, whose worker sets the devices up before TensorFlow
starts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gradcheck.kinds.strategy.judging import judge_replicas

from .conftest import FIXTURES


def _check(target: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gradcheck", "check", f"{FIXTURES / 'distributed_loss.py'}:{target}",
         "--wrt", "variables", "--no-compiled", "--format", "json", *flags],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(FIXTURES.parent)})


@pytest.mark.parametrize(("target", "status", "words"), [
    ("mean_loss", "fail", "tf.nn.compute_average_loss"),
    ("average_loss", "pass", "matches the single-device gradient"),
    ("regularised_loss", "fail", "tf.nn.scale_regularization_loss"),
    ("scaled_regularised_loss", "pass", "matches the single-device gradient"),
])
def test_a_distributed_loss_is_judged_against_the_whole_batch(target: str, status: str,
                                                              words: str) -> None:
    done = _check(target, "--strategy", "mirrored:2")
    [found] = [c for c in json.loads(done.stdout)["checks"] if c["check"] == "strategy"]
    assert found["status"] == status and words in found["message"], found
    assert done.returncode == (1 if status == "fail" else 0), done.stderr


@pytest.mark.parametrize(("spec", "words"), [
    ("mirrored:0", "must be mirrored:N or multiworker:N with N at least 1"),
    ("mirrored:3", "a batch of 8 does not split evenly over 3 replicas"),
    ("mirrored:9", "a batch of 8 cannot feed 9 replicas"),
])
def test_a_strategy_that_cannot_split_the_batch_is_exit_2(spec: str, words: str) -> None:
    done = _check("mean_loss", "--strategy", spec)
    assert done.returncode == 2 and words in done.stderr, done.stderr


def test_the_replica_sum_is_named_by_what_it_repeats() -> None:
    import numpy as np

    whole = [np.array([1.0, 2.0]), np.array([0.5])]
    assert judge_replicas(whole, [2 * w for w in whole], 2, "float32")[0] == "mean"
    regularisation = [np.array([0.1, 0.0]), None]
    summed = [whole[0] + regularisation[0], whole[1]]
    assert judge_replicas(whole, summed, 2, "float32", regularisation)[0] == "regularisation"
    assert judge_replicas(whole, whole, 2, "float32")[0] == "same"


def _multiworker_processes() -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                text = cmdline.read().decode(errors="replace")
        except OSError:
            continue
        if "gradcheck.kinds.strategy.multiworker" in text:
            found.append(entry)
    return found


def test_two_local_workers_sum_the_gradient_and_leave_no_process() -> None:
    """A real MultiWorkerMirroredStrategy run: two worker processes on localhost ports."""
    for target, status, words in [
        ("regularised_loss", "fail", "tf.nn.scale_regularization_loss"),
        ("average_loss", "pass", "MultiWorkerMirroredStrategy step over 2 worker processes"),
    ]:
        done = _check(target, "--strategy", "multiworker:2")
        [found] = [c for c in json.loads(done.stdout)["checks"] if c["check"] == "strategy"]
        assert found["status"] == status and words in found["message"], found
    assert not _multiworker_processes()
