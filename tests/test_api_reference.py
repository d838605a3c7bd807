"""The public API is discoverable from an editor or a notebook without importing TensorFlow:
dir(gradcheck) lists the public names, check, assert_gradients and Watch have real signatures and
docstrings, and the API reference page is generated from them by pdoc (tools/api_reference.py)."""

from __future__ import annotations

import html
import inspect
import re
import subprocess
import sys
from pathlib import Path

import gradcheck

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = ["CheckResult", "Report", "Watch", "__version__", "assert_gradients", "check"]


def test_dir_lists_the_public_names_and_nothing_imported() -> None:
    assert dir(gradcheck) == sorted(gradcheck.__all__) == PUBLIC
    for name in gradcheck.__all__:
        assert getattr(gradcheck, name) is not None


def test_the_public_names_have_real_signatures_and_docstrings() -> None:
    watch = inspect.signature(gradcheck.Watch)
    assert list(watch.parameters)[:6] == ["directory", "stop", "keep", "health", "tensorboard",
                                          "verbose"]
    assert watch.parameters["keep"].default == 5
    check = inspect.signature(gradcheck.check)
    assert list(check.parameters)[:4] == ["f", "args", "kwargs", "upstream"]
    assert {"atol", "rtol", "mode", "wrt", "order", "isolate"} <= set(check.parameters)
    assert list(inspect.signature(gradcheck.assert_gradients).parameters) == [
        "f", "args", "options"]
    for name in ("check", "assert_gradients", "Watch", "Report", "CheckResult"):
        assert len(inspect.getdoc(getattr(gradcheck, name)) or "") > 40, name


def test_signatures_are_read_without_importing_tensorflow() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import inspect, sys, gradcheck\n"
         "for name in gradcheck.__all__: inspect.signature(getattr(gradcheck, name))"
         " if callable(getattr(gradcheck, name)) else None\n"
         "print(sorted(m for m in ('tensorflow', 'keras', 'tf_keras') if m in sys.modules))"],
        capture_output=True, text=True, timeout=120, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]", done.stderr


def _text(page: Path) -> str:
    body = page.read_text(encoding="utf-8")
    body = body[body.index("<main"):]
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def test_the_reference_page_is_built_from_the_docstrings(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "api_reference.py"),
                           str(tmp_path)], capture_output=True, text=True, timeout=300,
                          check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "does not resolve" not in done.stderr, done.stderr
    text = _text(tmp_path / "gradcheck.html")
    for name in ("check", "assert_gradients", "Watch", "Report", "CheckResult"):
        first = " ".join((inspect.getdoc(getattr(gradcheck, name)) or "").split(". ")[0].split())
        assert first.replace("`", "")[:60] in text, name
    compact = re.sub(r"\s+", "", text)  # the signatures' tokens are spaced apart
    assert "Watch(directory:str|os.PathLike[str]='gradcheck-snapshots',stop:bool=True," in compact
    assert "*args:Any,**kwargs:Any" not in compact
    assert "check(f:Callable[...,typing.Any]|str,*args:Any," in compact
    for field in ("ok:bool", "exit_code:", "checks:tuple[CheckResult,...]",
                  "max_abs_err:float|None", "location:", "status:"):
        assert field in compact, field
