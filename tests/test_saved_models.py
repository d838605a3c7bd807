"""Saved models as TARGETs: a SavedModel whose custom gradient was not saved (named, with the
SaveOptions fix), the same model saved with it (passes), a .keras file whose custom layer forgot
an argument in get_config (--against the original: its values differ), and the usage errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gradcheck
from gradcheck.errors import LoadError
from gradcheck.kinds.against.judging import judge_against

from .conftest import FIXTURES

SAVED = FIXTURES / "saved"
ORIGINALS = FIXTURES / "saved_models.py"
POINT = np.array([[1.0, 2.0, 3.0]], np.float32)


def _check(target: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """A fresh `gradcheck check` (a SavedModel's custom gradients must not be known to the
    process already, as they are in one that has run the original)."""
    return subprocess.run(
        [sys.executable, "-m", "gradcheck", "check", target, "--no-compiled", "--format", "json",
         *flags], capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(FIXTURES.parent)})


def _found(done: subprocess.CompletedProcess[str], kind: str) -> dict[str, object]:
    [found] = [c for c in json.loads(done.stdout)["checks"] if c["check"] == kind]
    return found


def test_a_custom_gradient_lost_in_the_save_is_named_with_the_fix() -> None:
    done = _check(str(SAVED / "softplus_lost"), "-i", "[[1.0, 2.0, 3.0]]",
                  "--against", f"{ORIGINALS}:softplus")
    assert done.returncode == 1, done.stderr
    lost = _found(done, "custom-gradient")
    assert lost["status"] == "fail" and "IdentityN" in str(lost["message"])
    assert "SaveOptions(experimental_custom_gradients=True)" in str(lost["message"])
    against = _found(done, "against")
    assert against["status"] == "fail" and "no gradient where" in str(against["message"])


def test_a_saved_model_with_its_custom_gradient_passes_at_its_signatures_shapes() -> None:
    done = _check(str(SAVED / "softplus_kept"))  # no -i: the input signature's shape
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert {c["status"] for c in report["checks"]} == {"pass"}
    assert [i["shape"] for i in report["inputs"] if i["kind"] == "argument"] == [[2, 3]]


@pytest.mark.parametrize(("saved", "original", "status", "words"), [
    ("scaled.keras", "scaled", "fail", "get_config()"),
    ("configured.keras", "configured", "pass", "match"),
])
def test_a_keras_file_is_compared_with_its_original(saved: str, original: str, status: str,
                                                     words: str) -> None:
    report = gradcheck.check(str(SAVED / saved), POINT, against=f"{ORIGINALS}:{original}",
                             compiled=False)
    [found] = [c for c in report.checks if c.check == "against"]
    assert found.status == status and words in found.message, found.message
    if status == "fail":
        assert found.max_rel_err == pytest.approx(0.9, rel=1e-3)  # factor 1 instead of 10


def test_a_signature_is_named_after_the_directory() -> None:
    report = gradcheck.check(f"{SAVED / 'softplus_kept'}:serving_default", POINT,
                             compiled=False)
    assert report.ok and {i.name for i in report.inputs} >= {"x"}


def test_a_missing_attribute_lists_those_there_are() -> None:
    with pytest.raises(LoadError, match=r"no attribute or signature 'predict'.*serving_default"):
        gradcheck.check(f"{SAVED / 'softplus_kept'}:predict", POINT)


def test_a_directory_that_is_not_a_saved_model_is_exit_2_in_one_line() -> None:
    done = _check(str(SAVED), "-i", "1.0")
    assert done.returncode == 2
    error = json.loads(done.stdout)["error"]
    assert "is not a SavedModel (it has no saved_model.pb)" in error and "\n" not in error


def test_the_against_verdict_tells_values_from_gradients() -> None:
    values, gradient = [np.array([1.0, 2.0])], [np.array([0.5, -1.0])]
    assert judge_against((values, values), (gradient, gradient), "float32")[0] == "same"
    assert judge_against((values, values), ([None], gradient), "float32")[0] == "missing"
    assert judge_against((values, values), ([2 * gradient[0]], gradient), "float32")[0] == (
        "gradient")
    assert judge_against(([2 * values[0]], values), (gradient, gradient), "float32")[0] == (
        "values")


def test_a_function_object_is_compared_with_a_saved_target() -> None:
    from .conftest import fixture_module

    module = fixture_module("saved_models")
    report = gradcheck.check(module.scaled, POINT, against=str(SAVED / "scaled.keras"),
                             compiled=False)
    [found] = [c for c in report.checks if c.check == "against"]
    assert found.status == "fail" and "values differ" in found.message
