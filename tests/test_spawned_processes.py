"""Processes that f starts end with its check, on every way a check ends, so that nothing is
left running after gradcheck returns (fixtures/spawned_processes.py: users' real patterns)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import gradcheck
from tests.conftest import FIXTURES, as_at_a_terminal, fixture_module

CASES = ["env_in_subprocess", "external_tool", "pool_never_closed", "executor_never_shut",
         "server_started"]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _started(pid_file: Path) -> list[int]:
    return sorted({int(line) for line in pid_file.read_text().split()})


def _ended_soon(pids: list[int]) -> bool:
    for _ in range(20):  # a SIGKILLed process leaves /proc as its parent reaps it
        if not any(_alive(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def pid_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "pids"
    path.touch()
    monkeypatch.setenv("GRADCHECK_CHILD_PID_FILE", str(path))
    return path


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="process groups are read from /proc")
# Each case once (in the one spare worker these tests share), in float32 or float64.
@pytest.mark.parametrize(("name", "dtype"), [(name, (np.float32, np.float64)[i % 2])
                                             for i, name in enumerate(CASES)])
def test_processes_f_starts_end_before_an_isolated_check_returns(
        name: str, dtype: type, pid_file: Path) -> None:
    module = fixture_module("spawned_processes")
    x = np.asarray(getattr(module, f"{name}_inputs")[0], dtype=dtype)
    report = gradcheck.check(getattr(module, name), x, isolate=True, compiled=False)
    assert report.ok, str(report)
    started = _started(pid_file)
    assert len(started) >= (2 if name == "server_started" else 1)  # and the server's child
    assert _ended_soon(started)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="process groups are read from /proc")
def test_processes_f_starts_end_when_the_command_is_interrupted(pid_file: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "gradcheck", "check", "spawned_processes.py:server_started",
         "--no-compiled", "--format", "json"],
        cwd=FIXTURES, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=as_at_a_terminal, env={**os.environ, "PYTHONPATH": str(FIXTURES.parent)})
    for _ in range(1200):
        if len(_started(pid_file)) >= 2 or process.poll() is not None:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=60)
    started = _started(pid_file)
    assert len(started) >= 2 and _ended_soon(started)
