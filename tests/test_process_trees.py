"""No process outlives its command, at any depth: `--strategy multiworker:N` workers and what
they start end on Ctrl-C, SIGTERM and --timeout, with their temporary files; a daemon f starts
is gone before `gradcheck check` returns, also under load; N is bounded by the machine, and
ports that cannot be had are one `Error:` line, exit 2. Every process a command starts carries
a marker in its environment, found in /proc however it was reparented."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gradcheck.kinds.strategy.multiworker import usable_cores, worker_limit
from gradcheck.processes.trees import available_memory
from tests.conftest import FIXTURES, as_at_a_terminal

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="processes read from /proc")

MARKER = "GRADCHECK_TEST_MARKER"
MULTIWORKER = ["bad/multiworker_hangs.py:f", "--wrt", "variables", "--no-compiled",
               "--strategy", "multiworker:2"]


def _marked(marker: str) -> list[str]:
    """The live processes (not zombies) whose environment carries MARKER, with their command."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                if f"{MARKER}={marker}".encode() not in environ.read():
                    continue
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                state = stat.read().rpartition(")")[2].split()[0]
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if state not in ("Z", "X"):
            found.append(f"{entry} {command[:120]}")
    return found


class Command:
    """A real `python -m gradcheck` with a marker and a TMPDIR of its own."""

    def __init__(self, tmp_path: Path, *args: str, tmpdir: Path | None = None) -> None:
        self.marker = uuid.uuid4().hex
        self.tmpdir = tmpdir or tmp_path / "tmp"
        self.tmpdir.mkdir(parents=True, exist_ok=True)
        self.started = tmp_path / "started"
        self.pids = tmp_path / "pids"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gradcheck", *args], cwd=FIXTURES, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=as_at_a_terminal,
            env={**os.environ, "PYTHONPATH": str(FIXTURES.parent), MARKER: self.marker,
                 "TMPDIR": str(self.tmpdir), "GRADCHECK_STARTED_FILE": str(self.started),
                 "GRADCHECK_CHILD_PID_FILE": str(self.pids)})

    def wait_started(self, count: int = 2) -> None:
        """Until COUNT multiworker workers have started what they start (or the command ended)."""
        for _ in range(3600):  # TensorFlow starting in three processes, on a busy machine
            if self.started.exists() and len(self.started.read_text().split()) >= count:
                return
            if self.process.poll() is not None:
                return
            time.sleep(0.05)

    def finish(self) -> tuple[int, str, str, list[str]]:
        """Exit code, stdout, stderr, and the processes still running the moment it returned."""
        stdout, stderr = self.process.communicate(timeout=240)
        return self.process.returncode, stdout, stderr, _marked(self.marker)


@pytest.fixture
def cleanup() -> Iterator[list[Command]]:
    commands: list[Command] = []
    yield commands
    for command in commands:  # a failing test leaves nothing behind either
        if command.process.poll() is None:
            command.process.kill()
        for line in _marked(command.marker):
            os.kill(int(line.split()[0]), signal.SIGKILL)


def _leftovers(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "timeout"])
def test_multiworker_workers_and_what_they_start_end_with_the_command(
        how: str, tmp_path: Path, cleanup: list[Command]) -> None:
    extra = ["--timeout", "30"] if how == "timeout" else []  # past three TensorFlow start-ups
    command = Command(tmp_path, "check", *MULTIWORKER, *extra)
    cleanup.append(command)
    command.wait_started()
    assert command.pids.exists(), command.process.poll()
    started = [int(pid) for pid in command.pids.read_text().split()]
    assert len(started) == 6, started  # two workers, each a child and a daemon
    if how != "timeout":
        command.process.send_signal(getattr(signal, how))
    code, _, stderr, left = command.finish()
    assert code == (3 if how == "timeout" else 130), stderr
    assert len(stderr.strip().splitlines()) == 1 and stderr.strip().startswith("Error: "), stderr
    if how == "timeout":
        assert "MultiWorkerMirroredStrategy step over 2 worker processes" in stderr
    assert left == []
    assert _leftovers(command.tmpdir) == []


def test_multiworker_beyond_what_the_machine_holds_is_one_error_line(
        tmp_path: Path, cleanup: list[Command]) -> None:
    limit, why = worker_limit(usable_cores(), available_memory())
    command = Command(tmp_path, "check", "distributed_loss.py:average_loss", "--wrt", "variables",
                      "--no-compiled", "--strategy", f"multiworker:{limit + 1}")
    cleanup.append(command)
    code, _, stderr, left = command.finish()
    assert code == 2
    assert stderr == (f"Error: --strategy multiworker:{limit + 1}: this machine holds at most"
                      f" {limit} worker processes ({why})\n")
    assert left == []


GiB = 1 << 30


@pytest.mark.parametrize(("cores", "available", "expected"), [
    (2, 64 * GiB, (8, "2 cores, at most 4 workers each")),
    (64, 4 * GiB, (5, "4.0GiB of memory available, about 768.0MiB per worker")),
    (1, 100 << 20, (1, "100.0MiB of memory available, about 768.0MiB per worker")),
    (3, None, (12, "3 cores, at most 4 workers each")),
])
def test_the_multiworker_bound_is_cores_and_memory(
        cores: int, available: int | None, expected: tuple[int, str]) -> None:
    assert worker_limit(cores, available) == expected


def _unshare_works() -> bool:
    try:
        return subprocess.run(["unshare", "-rn", "true"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not _unshare_works(), reason="needs unshare -rn (a network namespace)")
@pytest.mark.parametrize(("setup", "why"), [
    # a network namespace whose loopback is down: ports bind, but nothing connects
    ("true", "Network is unreachable"),
    # its loopback up, with one ephemeral port, which the first bind takes
    ("ip link set lo up && echo '60000 60000' > /proc/sys/net/ipv4/ip_local_port_range",
     "Address already in use"),
])
def test_no_free_port_for_multiworker_is_exit_2(setup: str, why: str, tmp_path: Path) -> None:
    done = subprocess.run(
        ["unshare", "-rn", "sh", "-c", f'{setup} && exec "$@"', "sh", sys.executable, "-m",
         "gradcheck", "check", "distributed_loss.py:average_loss", "--wrt", "variables",
         "--no-compiled", "--strategy", "multiworker:2", "--format", "json"],
        cwd=FIXTURES, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(FIXTURES.parent)})
    assert done.returncode == 2, done.stderr
    message = ("--strategy multiworker:2 needs 2 free TCP ports on localhost for its workers to"
               f" reach each other: {why}")
    assert done.stderr == f"Error: {message}\n"
    assert json.loads(done.stdout)["error"] == message


def _load(cores: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]


@pytest.mark.parametrize("target", ["spawned_processes.py:daemon_started",
                                    "spawned_processes.py:server_started"])
def test_what_f_starts_is_gone_when_check_returns_even_a_daemon_under_load(
        target: str, tmp_path: Path, cleanup: list[Command]) -> None:
    """A daemon (forked, in a session of its own) used to hold the caller's stderr until it
    ended by itself (120 s); now nothing f started runs the moment the command returns, with
    every core busy."""
    load = _load(usable_cores())
    try:
        begun = time.monotonic()
        command = Command(tmp_path, "check", target, "--no-compiled", "-q")
        cleanup.append(command)
        code, stdout, stderr, left = command.finish()
        took = time.monotonic() - begun
    finally:
        for busy in load:
            busy.kill()
            busy.wait()
    assert code == 0 and stdout.startswith("OK "), stderr
    assert len(command.pids.read_text().split()) >= 2
    assert left == []
    assert took < 100  # not the 120 s the daemon would have held stderr open
    assert _leftovers(command.tmpdir) == []


def test_a_long_tmpdir_breaks_no_command(tmp_path: Path, cleanup: list[Command]) -> None:
    """AF_UNIX paths hold 107 bytes: multiprocessing's socket goes to a short folder."""
    long = tmp_path / ("x" * 120) / ("y" * 60)
    (tmp_path / "pyproject.toml").write_text(
        f'[[tool.gradcheck.check]]\ntarget = "{FIXTURES}/two_in_two_out.py:f"\n'
        'compiled = false\n')
    for args, expected in [
        (["check", "two_in_two_out.py:f", "--no-compiled", "-q"], "OK two_in_two_out.py:f"),
        (["run", "--config", str(tmp_path / "pyproject.toml"), "-q"], ""),
        (["--version"], "gradcheck"),
    ]:
        command = Command(tmp_path, *args, tmpdir=long)
        cleanup.append(command)
        code, stdout, stderr, left = command.finish()
        assert code == 0, stderr
        assert stdout.startswith(expected) and "Traceback" not in stderr
        assert left == []
        assert _leftovers(long) == []


def _mount_namespace_works() -> bool:
    try:
        return subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs tmpfs /mnt"],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# A TMPDIR on a 2 MiB tmpfs with 16 KiB left: the workers' job fits, their result does not.
FULL_DISK = """mkdir -p "$FULL" && mount -t tmpfs -o size=2M tmpfs "$FULL" &&
dd if=/dev/zero of="$FULL/filler" bs=4k count=508 2>/dev/null; TMPDIR="$FULL" exec "$@" """


@pytest.mark.skipif(not _mount_namespace_works(), reason="needs unshare -rm (a tmpfs of its own)")
def test_multiworker_on_a_full_disk_is_one_error_line(tmp_path: Path) -> None:
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", FULL_DISK, "sh", sys.executable, "-m", "gradcheck",
         "check", "distributed_loss.py:average_loss", "--wrt", "variables", "--no-compiled",
         "--strategy", "multiworker:2"],
        cwd=FIXTURES, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(FIXTURES.parent), "FULL": str(tmp_path / "full")})
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("Error: --strategy multiworker: cannot write the workers' file ")
    assert "Traceback" not in done.stderr and "ZipFile" not in done.stderr
