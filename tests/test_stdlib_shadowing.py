"""A user's file named like a standard-library module: in the current folder it harms nothing
gradcheck needs (the check runs), and where it does break TensorFlow's import (first on
PYTHONPATH) it is a usage error (exit 2) naming the file, not an internal one (exit 4)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# As users' Q&A threads show them: a script saved as json.py ("module 'json' has no attribute
# 'load'"), a random.py experiment beside the training script (which broke multiprocessing's
# fork server before it could start a worker).
SHADOWS = {"json": "def loads(s):\n    return s\n", "random": "seed = 1\n"}
MODULE = "import tensorflow as tf\n\n\ndef f(x):\n    return tf.sin(x)\n"


def _check(cwd: Path, pythonpath: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gradcheck", "check", "mod.py:f", "-i", "[1.0]", "-q"],
        cwd=cwd, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": pythonpath})


@pytest.mark.parametrize("module", sorted(SHADOWS))
def test_a_stdlib_named_file_in_the_current_folder_does_no_harm(module: str,
                                                                 tmp_path: Path) -> None:
    (tmp_path / f"{module}.py").write_text(SHADOWS[module])
    (tmp_path / "mod.py").write_text(MODULE)
    done = _check(tmp_path, str(REPO))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("OK mod.py:f")


def test_a_stdlib_shadowing_file_that_breaks_tensorflow_is_exit_2_naming_it(
        tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "json.py").write_text(SHADOWS["json"])
    (tmp_path / "mod.py").write_text(MODULE)
    done = _check(tmp_path, f"{tmp_path / 'lib'}{os.pathsep}{REPO}")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "lib/json.py shadows the standard library's module json: rename it" in done.stderr
    assert "Traceback" not in done.stderr
