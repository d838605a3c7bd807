"""The README and every page of docs/ as a CommonMark renderer (GitHub's) shows them: every
section heading the text has is rendered as a heading (none swallowed by a code fence left
open), every local link leads to a file, and every `$ gradcheck ...` command shown in a code
block runs and gets the findings shown. A block whose info string is `text` is a transcript
of output, whose commands are not run (a snapshot that only a training run writes). The commands
run in an environment installed exactly as the README's Install section says, in a copy of the
repository: what the docs show needs nothing the README does not install."""

from __future__ import annotations

import fcntl
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKDOWN = MarkdownIt("commonmark").enable("table")  # GitHub's: CommonMark and tables
OUTPUT_ONLY = "text"
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
# A finding's title in the table format: "2. FAIL connected (scale/w -> y)  file.py:14".
FINDING = re.compile(r"^\d+\. (FAIL|WARN|ERROR) (\S+)", re.MULTILINE)


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _intended_headings(text: str) -> list[str]:
    """The headings as the author meant them: outside fences, where a fence is closed by the
    next line that starts with its backticks (whatever follows them)."""
    headings, fence = [], None
    for line in text.splitlines():
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)[0] * 3
        elif fence is not None and line.lstrip().startswith(fence):
            fence = None
        elif fence is None and (heading := HEADING.match(line)):
            headings.append(heading.group(2))
    return headings


def _rendered_headings(tokens: list[Token]) -> list[str]:
    return [tokens[i + 1].content for i, token in enumerate(tokens)
            if token.type == "heading_open"]


@pytest.mark.parametrize("path", DOCS, ids=_name)
def test_every_heading_renders_as_a_heading(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    swallowed = [h for h in _intended_headings(text)
                 if h not in _rendered_headings(MARKDOWN.parse(text))]
    assert not swallowed, f"{_name(path)}: a code fence left open swallows {swallowed}"


@pytest.mark.parametrize("path", DOCS, ids=_name)
def test_no_text_follows_a_closing_fence(path: Path) -> None:
    """A closing fence has nothing after its backticks: with text it does not close (CommonMark)."""
    fence, bad = None, []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)
        elif fence is not None and opened and opened.group(1).startswith(fence):
            if opened.group(2).strip():
                bad.append(f"{_name(path)}:{number}: {line.strip()}")
            fence = None
    assert not bad


def _links(tokens: list[Token]) -> Iterator[str]:
    for token in tokens:
        for child in token.children or ():
            if child.type == "link_open":
                yield str(child.attrs.get("href", ""))
            elif child.type == "image":
                yield str(child.attrs.get("src", ""))


@pytest.mark.parametrize("path", DOCS, ids=_name)
def test_every_local_link_leads_to_a_file(path: Path) -> None:
    tokens = MARKDOWN.parse(path.read_text(encoding="utf-8"))
    local = [link.partition("#")[0] for link in _links(tokens)
             if link and not re.match(r"^[a-z]+:", link) and not link.startswith("#")]
    missing = [link for link in local if not (path.parent / link).exists()]
    assert not missing, f"{_name(path)} links to {missing}"


def _shown_commands() -> Iterator[tuple[str, str, str]]:
    """(where, command, the output shown after it) of each `$ gradcheck` line in a code block."""
    for path in DOCS:
        for token in MARKDOWN.parse(path.read_text(encoding="utf-8")):
            if token.type != "fence" or token.info.strip() == OUTPUT_ONLY:
                continue
            lines = token.content.splitlines()
            starts = [i for i, line in enumerate(lines) if line.startswith("$ ")]
            for index, start in enumerate(starts):
                end = starts[index + 1] if index + 1 < len(starts) else len(lines)
                where = f"{_name(path)}:{token.map[0] + start + 2 if token.map else 0}"
                yield where, lines[start][2:], "\n".join(lines[start + 1:end])


COMMANDS = list(_shown_commands())


def test_the_docs_show_commands() -> None:
    assert len(COMMANDS) >= 20
    assert all(command.startswith("gradcheck ") for _, command, _ in COMMANDS), [
        f"{where}: {command}" for where, command, _ in COMMANDS
        if not command.startswith("gradcheck ")]


def readme_install_command() -> str:
    """The README's install line (the first command of its Install section's code block)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Install"):]
    fence = next(t for t in MARKDOWN.parse(section) if t.type == "fence")
    return fence.content.strip().splitlines()[0]


DEMO_STEP = " && .venv/bin/gradcheck demo"
# Left out of the copy: what a fresh clone does not have.
NOT_CLONED = shutil.ignore_patterns(".venv", ".git", "build", "dist", "__pycache__",
                                    "*.egg-info", ".mypy_cache", ".ruff_cache", "gradcheck-*")


@pytest.fixture(scope="session")
def readme_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository with .venv installed by the README's command, built once for
    all pytest-xdist workers. The command's last step, the demo, is left out: the installed
    demo is test_packaging's, and these commands need only the install."""
    # pytest-xdist's workers each have a folder in the session's: they share its parent.
    shared = tmp_path_factory.getbasetemp()
    if "PYTEST_XDIST_WORKER" in os.environ:
        shared = shared.parent
    clone, done = shared / "readme-clone", shared / "readme-clone.done"
    with open(shared / "readme-clone.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(clone, ignore_errors=True)
            shutil.copytree(ROOT, clone, ignore=NOT_CLONED, symlinks=True)
            environment = {k: v for k, v in os.environ.items()
                           if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
            install = readme_install_command().removesuffix(DEMO_STEP)
            installed = subprocess.run(["bash", "-c", install], cwd=clone,
                                       env=environment, capture_output=True, text=True,
                                       timeout=1800, check=False)
            assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
            done.write_text(installed.stdout)
    return clone


def test_the_readme_installs_with_python3_and_runs_the_demo() -> None:
    command = readme_install_command()
    assert command.startswith("python3 -m venv .venv && .venv/bin/pip install ")
    assert command.endswith(DEMO_STEP)


@pytest.mark.slow
@pytest.mark.parametrize("where, command, shown", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_every_command_shown_runs_and_finds_what_is_shown(where: str, command: str, shown: str,
                                                          readme_install: Path) -> None:
    arguments = shlex.split(command, comments=True)
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(readme_install / ".venv" / "bin" / "gradcheck"), *arguments[1:]],
                          cwd=readme_install, capture_output=True, text=True, timeout=300,
                          check=False, env={**environment, "NO_COLOR": "1", "COLUMNS": "200"})
    assert done.returncode in (0, 1), f"{where}: {command}\n{done.stderr}"
    missing = [f"{status} {kind}" for status, kind in FINDING.findall(shown)
               if f"{status} {kind}" not in done.stdout]
    assert not missing, f"{where}: {command} no longer finds {missing}:\n{done.stdout}"


@pytest.mark.parametrize("folder", ["gradcheck", "tests", "tools", "benchmarks"])
def test_every_module_has_the_docstring_the_module_map_is_made_of(folder: str) -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from module_map import first_sentence
    finally:
        sys.path.remove(str(ROOT / "tools"))
    missing = [_name(path) for path in sorted((ROOT / folder).rglob("*.py"))
               if path.name != "__init__.py" or folder == "gradcheck"
               if first_sentence(path) is None]
    assert not missing
