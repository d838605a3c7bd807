"""The command line never imports TensorFlow: --help, --version and usage errors answer at once,
and checks run in a worker process that imports it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import os, sys
from gradcheck.cli import cli
try:
    cli(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
if os.environ.get("PROBE_IMPORTS_TENSORFLOW"):
    import tensorflow
print("EXIT", code, "TF", "tensorflow" in sys.modules, file=sys.stderr)
"""


def _run(*args: str, **env: str) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, **env})
    return done.stdout, done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("args, code", [
    (["--help"], 0),
    (["--version"], 0),
    (["check", "--help"], 0),
    (["check"], 2),
    (["check", "x.py:f", "--mode", "slow"], 2),
    (["nonsense"], 2),
])
def test_no_tensorflow_import(args: list[str], code: int) -> None:
    stdout, last = _run(*args)
    assert last == f"EXIT {code} TF False"


def test_checks_run_in_a_worker_so_the_command_line_never_imports_tensorflow() -> None:
    target = Path(__file__).resolve().parent.parent / "fixtures" / "two_in_two_out.py"
    stdout, last = _run("check", f"{target}:f", "-q")
    assert last == "EXIT 0 TF False" and stdout.startswith("OK ")


def test_the_probe_can_see_a_tensorflow_import() -> None:
    stdout, last = _run("--version", PROBE_IMPORTS_TENSORFLOW="1")
    assert last == "EXIT 0 TF True"


def test_version_names_the_python_tensorflow_and_keras_it_sees_without_importing_them() -> None:
    from importlib import metadata

    stdout, last = _run("--version")
    assert last == "EXIT 0 TF False"
    lines = stdout.splitlines()
    assert lines[0].startswith("gradcheck ")
    assert lines[1].startswith(f"Python {sys.version.split()[0]}")
    assert lines[2] == f"TensorFlow: tensorflow {metadata.version('tensorflow')}"
    assert f"keras {metadata.version('keras')}" in lines[3]


def test_check_help_says_what_target_is_with_examples_and_that_timeout_counts_start_up() -> None:
    stdout, last = _run("check", "--help")
    assert last == "EXIT 0 TF False"
    assert "gradcheck check my_ops.py:f -i '[1.0, -2.0, 3.0]'" in stdout
    stdout = " ".join(stdout.split())  # as click wrapped it
    assert "TARGET is the function to check: path/to/file.py:function" in stdout
    assert "TensorFlow's start-up in the worker included" in stdout
    assert "instead of stdout" in stdout
