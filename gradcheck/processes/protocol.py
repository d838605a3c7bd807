"""The messages between the parent (gradcheck.processes.supervisor) and a worker process
(gradcheck.processes.worker): requests down, replies up, each a frozen dataclass, told apart by
type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gradcheck.check_settings import DEFAULT_RUN, CheckSettings
from gradcheck.errors import GradcheckError, Phase

if TYPE_CHECKING:
    from gradcheck.options import CheckOptions
    from gradcheck.report import Report


@dataclass(frozen=True)
class Job:
    """One check: `function(*args, options, settings)` returns its Report, in a worker.

    `function` must be importable by name (a module-level function); `name` is the user's
    function and `target` the TARGET as written, both for messages. `options` are what the
    user asked, `settings` how the run goes (its callbacks stay behind: the worker reports
    through its own).
    """

    function: Callable[..., Report]
    args: tuple[Any, ...]
    options: CheckOptions
    name: str
    target: str
    timeout: float | None = None
    timeout_flag: str = "--timeout"
    memory_limit: int | None = None
    # Jobs of one session (a `gradcheck run`) that share a worker share its loaded modules.
    session: str | None = None
    settings: CheckSettings = DEFAULT_RUN


@dataclass(frozen=True)
class JobRequest:
    """Run `job` in the parent's directory and environment."""

    job: Job
    cwd: str
    environ: dict[str, str]


@dataclass(frozen=True)
class Ready:
    """TensorFlow is imported; `main_thread` is the thread that runs the checks."""

    main_thread: int


@dataclass(frozen=True)
class Broken:
    """The worker cannot start (TensorFlow cannot be imported): why."""

    reason: str | GradcheckError


@dataclass(frozen=True)
class Began:
    """The check is about to run `phase`."""

    phase: Phase


@dataclass(frozen=True)
class Progress:
    task: str
    done: int
    total: int


@dataclass(frozen=True)
class Where:
    """Near its time limit: the user's line the check is running, and the stack."""

    line: str
    stack: str


@dataclass(frozen=True)
class Outcome:
    """The check ended: its report, or the error that stopped it, and how long it took."""

    report: Report | None
    error: GradcheckError | None
    seconds: float
    # The worker ended processes f started, which f's module may still hold (a pool): it is
    # not to be used again.
    retiring: bool = False


Reply = Ready | Broken | Began | Progress | Where | Outcome

__all__ = ["Began", "Broken", "Outcome", "Progress", "Ready", "Reply", "JobRequest", "Where"]
