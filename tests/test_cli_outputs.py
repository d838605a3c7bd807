"""Output files (-o, --save, --plot) never harm the user's files: a file the run reads is refused
before it runs, symlinks/devices/FIFOs are written through, files follow the umask, an
unwritable path is an error before the check, and nothing partial is left behind."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result

from tests.conftest import FIXTURES

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def victim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's module in the current folder, with an input and an upstream file."""
    shutil.copy(FIXTURES / "two_in_two_out.py", tmp_path / "victim.py")
    np.save(tmp_path / "x.npy", np.array([0.5, -1.0, 2.0]))
    np.save(tmp_path / "u.npy", np.array([1.0, 2.0, 3.0]))
    (tmp_path / "pyproject.toml").write_text(
        '[[tool.gradcheck.check]]\ntarget = "victim.py:f"\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(("args", "message"), [
    (("check", "victim.py:f", "-o", "victim.py"),
     "-o 'victim.py' is the target's source, which this run reads"),
    (("check", "victim:f", "--save", "victim.py"),
     "--save 'victim.py' is the target's source, which this run reads"),
    (("check", "victim.py:f", "-i", "x=x.npy", "-i", "scale=x.npy", "-o", "./x.npy"),
     "-o './x.npy' is an input file, which this run reads"),
    (("vjp", "victim.py:f", "--upstream", "u.npy", "--upstream", "ones", "--save", "u.npy"),
     "--save 'u.npy' is an upstream file, which this run reads"),
    (("check", "victim.py:f", "-o", "r.json", "--save", "r.json"),
     "-o and --save name the same file"),
    (("run", "-o", "pyproject.toml"),
     "-o 'pyproject.toml' is the configuration, which this run reads"),
    (("run", "--config", "pyproject.toml", "-o", "victim.py"),
     "-o 'victim.py' is the source of check 'victim.py:f', which this run reads"),
])
def test_an_output_that_the_run_reads_is_refused_before_it_runs(
        args: tuple[str, ...], message: str, victim: Path,
        run_cli: Callable[..., Result]) -> None:
    before = {p.name: p.read_bytes() for p in victim.iterdir()}
    result = run_cli(list(args))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {message}") and result.stdout == ""
    assert {p.name: p.read_bytes() for p in victim.iterdir()} == before


def test_a_symlinked_source_is_recognised(victim: Path, run_cli: Callable[..., Result]) -> None:
    (victim / "link.json").symlink_to(victim / "victim.py")
    result = run_cli(["check", "victim.py:f", "-o", "link.json"])
    assert result.exit_code == 2 and "is the target's source" in result.stderr
    assert (victim / "victim.py").read_text().startswith('"""A two-input')


def test_a_symlink_is_written_through_and_stays_a_symlink(
        victim: Path, run_cli: Callable[..., Result]) -> None:
    (victim / "reports").mkdir()
    (victim / "latest.json").symlink_to(victim / "reports" / "r.json")
    result = run_cli(["check", "victim.py:f", "--format", "json", "-o", "latest.json"])
    assert result.exit_code == 0, result.output
    assert (victim / "latest.json").is_symlink()
    assert json.loads((victim / "reports" / "r.json").read_text())["ok"] is True
    assert sorted(p.name for p in (victim / "reports").iterdir()) == ["r.json"]


def test_a_fifo_is_written_into_not_replaced(victim: Path,
                                             run_cli: Callable[..., Result]) -> None:
    fifo = victim / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    result = run_cli(["check", "victim.py:f", "--format", "json", "-o", str(fifo)])
    reader.join(60)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert json.loads(received[0])["ok"] is True


def test_dev_null_is_written_into_and_stays_a_device(victim: Path,
                                                    run_cli: Callable[..., Result]) -> None:
    result = run_cli(["check", "victim.py:f", "-q", "-o", "/dev/null", "--save", "/dev/null"])
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_full_device_is_an_error_and_stays_a_device(victim: Path,
                                                      run_cli: Callable[..., Result]) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    result = run_cli(["check", "victim.py:f", "-q", "-o", "/dev/full"])
    assert result.exit_code == 2
    assert result.stderr == "Error: cannot write '/dev/full': No space left on device\n"
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_report_files_follow_the_umask(victim: Path, run_cli: Callable[..., Result]) -> None:
    old = os.umask(0o027)
    try:
        result = run_cli(["check", "victim.py:f", "-q", "-o", "r.txt", "--save", "r.npz"])
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    for name in ("r.txt", "r.npz"):
        assert stat.S_IMODE((victim / name).stat().st_mode) == 0o640, name


WRITE_UNDER_LIMIT = """
import resource, signal, sys
from gradcheck.errors import UsageError
from gradcheck.render.files import write_file
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    write_file(sys.argv[1], b"x" * 100000)
except UsageError as error:
    print(error.message)
"""


def test_a_write_that_fails_half_way_leaves_the_old_file_and_no_temporary(
        tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text("old")
    done = subprocess.run([sys.executable, "-c", WRITE_UNDER_LIMIT, str(tmp_path / "r.json")],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.stdout.startswith(f"cannot write {str(tmp_path / 'r.json')!r}: File too large")
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
    assert (tmp_path / "r.json").read_text() == "old"


@pytest.mark.parametrize(("flag", "path", "why"), [
    ("-o", "missing/r.json", "the folder '{dir}/missing' does not exist"),
    ("-o", "victim.py/r.json", "the folder '{dir}/victim.py' does not exist"),
    ("--save", "victim.py/sub/r.npz", "'{dir}/victim.py' is not a folder"),
    ("--plot", "victim.py/pictures", "'{dir}/victim.py' is not a folder"),
])
def test_an_unwritable_output_is_an_error_before_the_check_runs(
        flag: str, path: str, why: str, victim: Path, run_cli: Callable[..., Result],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from gradcheck.processes import supervisor

    def never(*args: object) -> None:
        raise AssertionError("a worker was started")

    monkeypatch.setattr(supervisor, "prestart", never)
    result = run_cli(["check", "victim.py:f", flag, path])
    assert result.exit_code == 2
    expected = f"Error: cannot write {path!r}: " + why.replace("{dir}", str(victim.resolve()))
    assert result.stderr == expected + "\n"
