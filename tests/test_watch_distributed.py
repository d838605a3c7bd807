"""gradcheck.Watch under tf.distribute: a real MultiWorkerMirroredStrategy cluster of two local
worker processes (TF_CONFIG on localhost ports), with tf-keras fit and a custom loop; and a
MirroredStrategy replica whose shard is empty. Every cluster's process groups are killed on the
way out, and the tests count what is left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES

pytestmark = pytest.mark.slow

DISTRIBUTED = FIXTURES / "training" / "distributed"
ROOT = FIXTURES.parent
sys.path.insert(0, str(DISTRIBUTED))
from cluster import run_cluster  # noqa: E402

sys.path.remove(str(DISTRIBUTED))


@pytest.fixture(autouse=True)
def _pythonpath(monkeypatch):
    """The workers import this checkout's gradcheck and the fixtures' losses."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(DISTRIBUTED)]))


def _alive(pids):
    """The worker processes (and their groups' members) still running, from /proc."""
    left = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[2]) in pids and fields[0] != "Z":  # its process group
                left.append(int(entry.name))
    return left


def _cluster(tmp_path, *args, **kwargs):
    command = [sys.executable, str(DISTRIBUTED / "multiworker.py"), *args]
    codes, errors, results, pids = run_cluster(2, command, tmp_path, **kwargs)
    assert _alive(pids) == []
    return codes, errors, results


def test_multiworker_fit_withholds_the_update_on_every_worker_and_the_chief_keeps_it(tmp_path):
    snapshots = tmp_path / "snaps"
    codes, errors, results = _cluster(tmp_path, "fit", "tf_keras", str(snapshots))
    assert codes == [0, 0], errors
    chief, other = results
    # Worker 1's shard is NaN at step 2: neither worker applies it, both stop there.
    assert chief["stopped"] and other["stopped"]
    assert chief["iterations"] == other["iterations"] == 2
    assert chief["weights"] == other["weights"] and chief["finite"]
    assert [Path(p).name for p in chief["snapshots"]] == ["step-000002"] and not other["snapshots"]
    assert "replica 1 of 2 (its shard holds 8 of the batch's 16 rows)" in errors[1]
    assert f"worker 0 (the chief) writes its snapshot under {snapshots}" in errors[1]
    snapshot = snapshots / "step-000002"
    report = json.loads((snapshot / "report.json").read_text())
    assert "SqrtGrad" in next(c["message"] for c in report["checks"] if c["status"] == "fail")
    # Replayed on one machine, in one process, with the losses named on the command line.
    replay = subprocess.run(
        [sys.executable, "-m", "gradcheck", "replay", str(snapshot), "--trust", "--path",
         str(DISTRIBUTED), "--format", "json"], capture_output=True, text=True, timeout=300,
        cwd=ROOT)  # the workers' directory: locations relative to it
    assert replay.returncode == 1, replay.stderr[-2000:]
    replayed = json.loads(replay.stdout)
    assert [c["message"] for c in replayed["checks"] if c["status"] == "fail"] == [
        c["message"] for c in report["checks"] if c["status"] == "fail"]


def test_multiworker_custom_loop_withholds_the_update_on_every_worker(tmp_path):
    snapshots = tmp_path / "snaps"
    codes, errors, results = _cluster(tmp_path, "loop", "tf_keras", str(snapshots))
    assert codes == [0, 0], errors
    chief, other = results
    assert chief["stopped"] and other["stopped"]
    assert chief["iterations"] == other["iterations"] == 4
    assert chief["weights"] == other["weights"] and chief["finite"]
    assert [Path(p).name for p in chief["snapshots"]] == ["step-000004"] and not other["snapshots"]
    assert "SqrtGrad" in errors[0] and "this is worker 1" in errors[1]


def test_multiworker_fit_without_a_trigger_is_bitwise_the_unwatched_run(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "watched").mkdir()
    _, errors, plain = _cluster(tmp_path / "plain", "fit", "tf_keras", str(tmp_path / "s"),
                                "--finite", "--plain")
    _, errors, watched = _cluster(tmp_path / "watched", "fit", "tf_keras",
                                  str(tmp_path / "s"), "--finite")
    assert plain[0] is not None and watched[0] is not None, errors
    assert {r["weights"] for r in plain} == {r["weights"] for r in watched}
    assert len({r["weights"] for r in watched}) == 1 and watched[0]["iterations"] == 8
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("how", ["killed", "ctrl-c"])
def test_the_loss_of_a_worker_leaves_no_process_behind(how, tmp_path):
    codes, errors, results = _cluster(tmp_path, "fit", "tf_keras", str(tmp_path / "s"),
                                      "--finite", "--die-at", "3",
                                      *(["--ctrl-c"] if how == "ctrl-c" else []), timeout=150)
    assert codes[1] == (-9 if how == "killed" else -2) and results[1] is None, errors
    assert codes[0] != 0 and results[0] is None  # the chief ends too: its collective fails


def test_an_empty_replica_shard_is_named_with_why(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(DISTRIBUTED)])}
    done = subprocess.run([sys.executable, str(DISTRIBUTED / "empty_shard.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    failing = seen["failing"]
    assert failing["snapshots"] == ["step-000002"] and failing["rows"] == [0]
    assert failing["finite"]
    assert failing["trigger"].startswith(
        "the loss is not finite on replica 1 of 2 (its shard of the batch's 1 row is empty;"
        " a per-replica mean over 0 rows is 0/0: average with tf.nn.compute_average_loss")
    # the diagnosis, on that replica's shard, says the same, not "nothing to differentiate"
    assert "the step's batch is empty" in failing["diagnosis"], failing
    assert "compute_average_loss" in failing["diagnosis"], failing
    assert seen["fixed"]["snapshots"] == [] and seen["fixed"]["finite"]


def test_parameter_server_strategy_is_refused_in_one_line():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(DISTRIBUTED / "parameter_server.py")],
                          capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == (
        "gradcheck.Watch does not support ParameterServerStrategy: its workers apply their"
        " updates asynchronously, each to the parameter servers on its own, so no step can be"
        " withheld on every worker; use MultiWorkerMirroredStrategy (synchronous)")
