"""--help, --version and usage errors answer without importing TensorFlow."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
from gradcheck.cli import cli
try:
    cli(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
print("EXIT", code, "TF", "tensorflow" in sys.modules, file=sys.stderr)
"""


def _run(*args: str) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                          timeout=120, check=False)
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


def test_the_probe_can_see_a_tensorflow_import() -> None:
    stdout, last = _run("check", "tests/does_not_exist.py:f")
    assert last == "EXIT 2 TF True"
