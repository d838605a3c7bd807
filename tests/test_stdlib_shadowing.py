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
SHADOWS = {"json": "def loads(s):\n    return s\n", "random": "seed = 1\n",
           # tensorflow/tensorflow#6457: an empty inspect.py beside the script ("touch
           # inspect.py"); flwrlabs/flower#5405: a typing.py ahead of the standard library's.
           "inspect": "", "typing": ""}
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


# (the file a user's folder put first on the path, as the reports had it, what it shadows)
ON_THE_PATH = [
    ("json.py", "the standard library's module json"),
    # tensorflow/models#3860: official/utils/logging, a package named like logging.
    ("logging/__init__.py", "the standard library's module logging"),
    # google/deepvariant#32: a math.py in deepvariant/core, beside the code that ran.
    ("math.py", "the standard library's module math"),
    ("inspect.py", "the standard library's module inspect"),  # tensorflow/tensorflow#6457
    ("typing.py", "the standard library's module typing"),  # flwrlabs/flower#5405
    # tensorflow/tensorflow#2370, dhasl002/custom_3d_unet#2: a script saved as tensorflow.py.
    ("tensorflow.py", "the installed package tensorflow"),
]


@pytest.mark.parametrize(("name", "what"), ON_THE_PATH)
def test_a_shadowing_file_first_on_the_path_is_exit_2_naming_it(name: str, what: str,
                                                                 tmp_path: Path) -> None:
    shadow = tmp_path / "lib" / name
    shadow.parent.mkdir(parents=True)
    shadow.write_text(SHADOWS.get(shadow.stem, ""))
    (tmp_path / "mod.py").write_text(MODULE)
    done = _check(tmp_path, f"{tmp_path / 'lib'}{os.pathsep}{REPO}")
    where = "lib/logging" if name.startswith("logging") else f"lib/{name}"
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{where} shadows {what}: rename it" in done.stderr
    assert "Traceback" not in done.stderr


def test_gradchecks_own_modules_named_like_others_shadow_nothing(tmp_path: Path) -> None:
    from gradcheck import shadowing
    from gradcheck.targets import keras

    user = tmp_path / "inspect.py"
    assert shadowing.shadowed_name(keras.__file__) is None  # an editable install's targets/keras.py
    assert shadowing.shadowed_name(str(user)) == "inspect"
