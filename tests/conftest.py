"""Shared helpers: the fixtures folder, loading a fixture module, running the CLI."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner, Result

from gradcheck.cli import cli
from gradcheck.render.json_format import check_dict
from gradcheck.targets.modules import import_module

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# Reports follow the terminal's width, and pytest-xdist gives its workers COLUMNS=80 (its own
# terminal's width, 80 off a terminal): tests that look for a phrase in a report read it laid
# out wide, whatever runs them. Widths themselves are tested in a pseudo-terminal
# (tests/test_widths.py), with COLUMNS unset there.
os.environ["COLUMNS"] = "200"

# The modules whose tests take minutes between them: real training runs, a pytest or Jupyter
# process per test, native crashes and hangs, building the wheel, functions of real libraries.
# `pytest -m "not slow"` (the inner loop) leaves them out; `.ci/run` runs every test.
SLOW_MODULES = frozenset({
    "test_watch", "test_strategy", "test_accumulation", "test_precision", "test_saved_models",
    "test_backward_determinism", "test_pytest_plugin", "test_notebook", "test_isolation",
    "test_cli_processes", "test_spawned_processes", "test_process_trees", "test_packaging",
    "test_real_world",
    "test_real_custom_gradients", "test_real_dtypes_keywords_kinks",
    "test_real_low_precision_models",
    # the heaviest of the rest (measured: half of the "not slow" time between them)
    "test_keras", "test_non_finite", "test_stdlib_shadowing", "test_float16_head",
    "test_pfor_fallback", "test_custom_gradient_discovery", "test_harness_transparency",
    "test_entry_points", "test_compiled_cache", "test_low_precision_kinks",
    "test_watch_live", "test_watch_reports", "test_watch_sources", "test_watch_distributed",
})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.module is not None and item.module.__name__.rpartition(".")[2] in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def started_tensorflow() -> None:
    """A worker process with TensorFlow started, for the tests of time limits (which count
    TensorFlow's start-up when a check needs a new worker process)."""
    from gradcheck.options import CheckOptions
    from gradcheck.pipeline import TargetRequest, check_request
    from gradcheck.processes.supervisor import Job, run_jobs

    target = fixture_target("two_in_two_out")
    run_jobs([Job(check_request, (TargetRequest(target),), CheckOptions(), "f", target)])


def details(result: Any) -> dict[str, Any]:
    """A finding's JSON `details`: its evidence's public fields (a note as its sentence)."""
    return dict(check_dict(result)["details"])


def notes(holder: Any) -> tuple[str, ...]:
    """What a report's (or a prepared or recorded program's) notes say."""
    return tuple(str(note) for note in holder.notes)


def fixture_module(name: str) -> ModuleType:
    return import_module(str(FIXTURES / f"{name}.py"))


def fixture_target(name: str, function: str = "f") -> str:
    return f"{FIXTURES / (name + '.py')}:{function}"


@pytest.fixture
def run_cli() -> Callable[..., Result]:
    def run(args: Sequence[str], **kwargs: Any) -> Result:
        env = {"NO_COLOR": "1", "COLUMNS": "200", **kwargs.pop("env", {})}
        return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False, **kwargs)

    return run


@pytest.fixture
def in_fixtures(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(FIXTURES)
    return FIXTURES


os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def as_at_a_terminal() -> None:
    """A command's preexec_fn: Ctrl-C as a terminal delivers it, SIGINT at its default whatever
    the test process (an xdist worker that earlier tests ran in) has it set to; an ignored
    SIGINT is inherited across exec and would make the command deaf to it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
