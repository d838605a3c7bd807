"""The installed console script and `python -m gradcheck`, run as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import FIXTURES

# pip puts console scripts next to the interpreter (bin/ or Scripts/).
SCRIPT = Path(sys.executable).with_name("gradcheck.exe" if os.name == "nt" else "gradcheck")
ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "TF_CPP_MIN_LOG_LEVEL": "3"}


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False,
                          env=ENV, cwd=FIXTURES)


def test_installed_console_script_reports_a_wrong_grad_fn() -> None:
    assert SCRIPT.is_file(), f"no console script at {SCRIPT}: install the package"
    done = _run(str(SCRIPT), "check", "custom_gradient_full_jacobian.py:f", "--format", "json")
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    assert (data["target"], data["ok"], data["exit_code"]) == (
        "custom_gradient_full_jacobian.py:f", False, 1)
    shape = [c for c in data["checks"] if c["check"] == "grad-shape"]
    assert [(c["status"], c["location"]) for c in shape] == [
        ("fail", "custom_gradient_full_jacobian.py:12")]


def test_python_dash_m_gradcheck_passes_a_correct_fixture() -> None:
    done = _run(sys.executable, "-m", "gradcheck", "check", "custom_gradient_correct.py:f", "-q")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "OK custom_gradient_correct.py:f: 7 passed\n"
    usage = _run(sys.executable, "-m", "gradcheck", "check")
    assert usage.returncode == 2
    assert usage.stderr == "Error: Missing argument 'TARGET'.\n"
