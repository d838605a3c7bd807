"""Processes the command line starts never harm the machine: -j is capped by cores and memory,
whatever f starts is killed with its worker, and Ctrl-C or SIGTERM end the command cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from gradcheck.runner import WORKER_MEMORY, cap_workers, usable_cores
from tests.conftest import FIXTURES, as_at_a_terminal

REPO = Path(__file__).resolve().parent.parent
GiB = 1 << 30


@pytest.mark.parametrize(("requested", "checks", "cores", "available", "expected"), [
    (1, 10, 2, 8 * GiB, (1, None)),
    (4, 3, 8, 8 * GiB, (3, None)),  # no more workers than checks, and nothing to say
    (10**20, 1111, 2, 64 * GiB, (2, "-j 100000000000000000000: running 2 checks at a time"
                                    " (2 cores)")),
    (16, 100, 32, 2 * GiB, (4, "-j 16: running 4 checks at a time (2.0GiB of memory"
                               " available, about 512.0MiB per worker)")),
    (8, 100, 32, 100 << 20, (1, "-j 8: running 1 check at a time (100.0MiB of memory"
                                " available, about 512.0MiB per worker)")),
    (3, 100, 4, None, (3, None)),
])
def test_workers_are_capped_by_cores_and_memory(
        requested: int, checks: int, cores: int, available: int | None,
        expected: tuple[int, str | None]) -> None:
    assert cap_workers(requested, checks, cores, available, WORKER_MEMORY) == expected


def test_a_huge_j_runs_no_more_workers_than_cores(tmp_path: Path,
                                                  run_cli: Callable[..., Result]) -> None:
    checks = "".join(f'[[tool.gradcheck.check]]\nname = "c{i}"\ntarget = "{FIXTURES}/'
                     f'two_in_two_out.py:f"\ncompiled = false\n' for i in range(3))
    (tmp_path / "pyproject.toml").write_text(checks)
    result = run_cli(["run", "--config", str(tmp_path / "pyproject.toml"),
                      "-j", "99999999999999999999", "--format", "json"])
    assert result.exit_code == 0, result.output
    cores = usable_cores()
    if cores < 3:
        assert result.stderr.startswith(f"note: -j 99999999999999999999: running {cores} check")
    assert [r["ok"] for r in json.loads(result.stdout)["reports"]] == [True] * 3


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_what_f_starts_is_killed_and_never_holds_the_users_pipes(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    process = subprocess.Popen(
        [sys.executable, "-m", "gradcheck", "check", "bad/starts_child.py:f", "-q",
         "--no-compiled"], cwd=FIXTURES, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO), "GRADCHECK_CHILD_PID_FILE": str(pid_file)})
    stdout, _ = process.communicate(timeout=200)  # the child's 300 s would hold the pipes
    assert process.returncode == 0 and stdout.startswith(b"OK ")
    child = int(pid_file.read_text())
    for _ in range(100):
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child)


@pytest.mark.parametrize(("signum", "output_format", "reason"), [
    (signal.SIGINT, "json", "interrupted (Ctrl-C)"),
    (signal.SIGTERM, "junit", "terminated (SIGTERM)"),
])
def test_an_interrupted_run_exits_130_and_reports_what_finished(
        signum: int, output_format: str, reason: str, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        f'[[tool.gradcheck.check]]\nname = "quick"\ntarget = "{FIXTURES}/two_in_two_out.py:f"\n'
        f'compiled = false\n[[tool.gradcheck.check]]\nname = "stuck"\n'
        f'target = "{FIXTURES}/bad/waits_forever.py:f"\n')
    started = tmp_path / "started"
    process = subprocess.Popen(
        [sys.executable, "-m", "gradcheck", "run", "--format", output_format], cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=as_at_a_terminal,
        env={**os.environ, "PYTHONPATH": str(REPO), "GRADCHECK_STARTED_FILE": str(started)})
    for _ in range(1800):
        if started.exists() or process.poll() is not None:
            break
        time.sleep(0.1)
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert stderr.splitlines()[-1] == f"Error: {reason}: 1 of 2 checks finished"
    assert "Traceback" not in stderr
    if output_format == "json":
        payload = json.loads(stdout)
        assert payload["exit_code"] == 130 and payload["ok"] is False
        quick, stuck = payload["reports"]
        assert quick["ok"] is True and quick["exit_code"] == 0
        assert stuck["exit_code"] == 130 and stuck["error"] == f"not finished: {reason}"
    else:
        assert 'name="quick"' in stdout
        assert f'<error message="not finished: {reason}"' in stdout


def test_ctrl_c_in_a_single_check_exits_130_with_one_error_line(tmp_path: Path) -> None:
    started = tmp_path / "started"
    process = subprocess.Popen(
        [sys.executable, "-m", "gradcheck", "check", "bad/waits_forever.py:f", "--format", "json"],
        cwd=FIXTURES, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=as_at_a_terminal,
        env={**os.environ, "PYTHONPATH": str(REPO), "GRADCHECK_STARTED_FILE": str(started)})
    for _ in range(1800):
        if started.exists() or process.poll() is not None:
            break
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130
    assert stderr.endswith("Error: interrupted (Ctrl-C)\n") and "Traceback" not in stderr
    assert json.loads(stdout)["exit_code"] == 130
