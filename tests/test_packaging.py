"""The wheel (built with pip, as a user would) and an installation without TensorFlow."""

from __future__ import annotations

import email
import os
import subprocess
import sys
import zipfile
from email.message import Message
from pathlib import Path

import pytest

from gradcheck.demo import DEMO_CASES, finding, short_location
from gradcheck.engine.runtime import TENSORFLOW_MISSING
from gradcheck.evidence import Location
from gradcheck.report import CheckResult, Report

ROOT = Path(__file__).resolve().parent.parent
DEVELOPER_TOOLS = ("ruff", "mypy", "import-linter", "hatchling")
TENSORFLOWS = ("tensorflow", "tensorflow-cpu", "tensorflow-macos", "tf-nightly", "tf_nightly")


@pytest.fixture(scope="module")
def wheel_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Without build isolation: hatchling comes with the dev group, so no download is needed.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(ROOT)], check=True, capture_output=True)
    (path,) = out.glob("gradcheck-*.whl")
    return path


@pytest.fixture(scope="module")
def wheel(wheel_path: Path) -> zipfile.ZipFile:
    return zipfile.ZipFile(wheel_path)


def _metadata(wheel: zipfile.ZipFile) -> Message:
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return email.message_from_bytes(wheel.read(name))


def test_the_wheel_carries_the_license_and_py_typed(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    assert "gradcheck/py.typed" in names
    (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    assert wheel.read(license_file).decode().startswith("MIT License")
    metadata = _metadata(wheel)
    assert metadata["License-Expression"] == "MIT"


def test_metadata_has_classifiers_no_placeholders_and_no_tensorflow_requirement(
        wheel: zipfile.ZipFile) -> None:
    metadata = _metadata(wheel)
    classifiers = metadata.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers and "Framework :: Pytest" in classifiers
    assert any(c.startswith("Programming Language :: Python :: 3.1") for c in classifiers)
    # No address that does not exist yet (an OWNER placeholder) is published.
    assert "OWNER" not in str(metadata)
    requires = metadata.get_all("Requires-Dist") or []
    # The repository's own tools are a dependency group (PEP 735), never a published extra.
    assert not [r for r in requires if r.split(">")[0].strip() in DEVELOPER_TOOLS]
    unconditional = [r for r in requires if "extra ==" not in r]
    assert not [r for r in unconditional if r.split(">")[0].split(";")[0].strip() in TENSORFLOWS]
    extras = set(metadata.get_all("Provides-Extra") or [])
    assert {"tensorflow", "tensorflow-cpu", "plot", "test"} <= extras
    assert "tensorflow>=2.16; extra == 'tensorflow'" in requires
    assert "tensorflow-cpu>=2.16; extra == 'tensorflow-cpu'" in requires


def test_the_wheel_ships_exactly_the_examples_the_demo_needs(wheel: zipfile.ZipFile) -> None:
    shipped = {n.split("gradcheck/_fixtures/", 1)[1] for n in wheel.namelist()
               if n.startswith("gradcheck/_fixtures/")}
    needed = {case.file for case in DEMO_CASES} | {u for case in DEMO_CASES for u in case.upstream
                                                   if (ROOT / "fixtures" / u).is_file()}
    assert shipped == needed
    assert not [n for n in wheel.namelist() if "bad/" in n or n.startswith("tests/")]


def test_the_installed_demo_gets_every_expected_verdict(wheel_path: Path, tmp_path: Path) -> None:
    # Installed as pip installs it (the examples inside the package), beside this TensorFlow.
    target = tmp_path / "installed"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), str(wheel_path)], check=True, capture_output=True)
    # At 80 columns: each example a block whose first line is whole (verdict, name, verdict).
    env = {**os.environ, "PYTHONPATH": str(target), "NO_COLOR": "1", "COLUMNS": "80"}
    result = subprocess.run([sys.executable, "-m", "gradcheck", "demo"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "every example got its expected verdict" in result.stdout
    assert max(len(line.rstrip()) for line in result.stdout.splitlines()) <= 80
    firsts = [line.split() for line in result.stdout.splitlines()
              if line.startswith(("PASS ", "FAIL "))]
    assert sorted(words[1] for words in firsts) == sorted(
        f"{case.file}:{case.function}" for case in DEMO_CASES)
    assert all(words[2:] == ["as", "expected"] for words in firsts)
    assert str(target) not in result.stdout  # examples named by file, not by installed path
    assert "composed_custom_gradients.py:21" in result.stdout


BLOCK_TENSORFLOW = """
import importlib.abc, sys

class _NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "tensorflow":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoTensorFlow())
"""


def test_without_tensorflow_a_check_says_how_to_install_it(tmp_path: Path) -> None:
    # Every process of the run (the command, the fork server, workers) starts without it.
    (tmp_path / "sitecustomize.py").write_text(BLOCK_TENSORFLOW)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
           "NO_COLOR": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "gradcheck", "check", "fixtures/two_in_two_out.py:f"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.stderr.strip().splitlines() == [f"Error: {TENSORFLOW_MISSING}"]
    assert result.returncode == 2
    # Ways that work before gradcheck is published: TensorFlow itself, or the clone's extra.
    assert "pip install tensorflow (or tensorflow-cpu" in TENSORFLOW_MISSING
    assert "pip install '.[tensorflow]'" in TENSORFLOW_MISSING


def test_the_demo_names_installed_examples_by_file_and_keeps_whole_clauses() -> None:
    installed = Path("/venv/lib/python3.11/site-packages/gradcheck/_fixtures")
    assert short_location(Location(f"{installed}/numpy_round_trip.py", 9), installed) == \
        "numpy_round_trip.py:9"
    assert short_location(Location("/elsewhere/ops.py", 3), installed) == "/elsewhere/ops.py:3"
    message = ("custom_gradient s (line 17): grad_fn is off by a factor of 2 for input x"
               " (autodiff and finite differences disagree in 3 of 9 elements; worst [0, 1]);"
               " fix: divide by 2")
    result = CheckResult("custom-gradient", "fail", message, "x", "y",
                         Location(f"{installed}/composed_custom_gradients.py", 21))
    shown = finding(Report("t", (), (), (result,)), installed)
    assert shown == ("custom-gradient at composed_custom_gradients.py:21: custom_gradient s"
                     " (line 17): grad_fn is off by a factor of 2 for input x (autodiff and"
                     " finite differences disagree in 3 of 9 elements; worst [0, 1])")
