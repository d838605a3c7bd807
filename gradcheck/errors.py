"""Exit codes (the one place that defines them) and the errors that stop a run before a
report exists, each with its exit code."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class ExitCode(enum.IntEnum):
    OK = 0
    CHECK_FAILED = 1
    USAGE_ERROR = 2
    FUNCTION_ERROR = 3
    INTERNAL_ERROR = 4
    INTERRUPTED = 130


# Longer messages are cut (the whole text stays in the traceback, where there is one).
MAX_MESSAGE = 1000


@dataclass(frozen=True)
class Phase:
    """What a check is about to run, announced so that a crash, a time-out or a memory cap can
    name it; `vectorised`: it runs TensorFlow's vectorisation (pfor, tf.vectorized_map), which a
    crash is retried without."""

    text: str
    vectorised: bool = False

    @classmethod
    def of(cls, what: Phase | str) -> Phase:
        return what if isinstance(what, Phase) else cls(what)


class GradcheckError(Exception):
    """A problem that ends the run with a one-line message.

    `phase` is what was running when a worker crashed, timed out or ran out of memory.
    """

    exit_code: ExitCode = ExitCode.USAGE_ERROR

    def __init__(self, message: str, *, user_traceback: str | None = None,
                 phase: str | None = None) -> None:
        if len(message) > MAX_MESSAGE:  # a 4 MB exception message is not a one-line error
            message = (f"{message[:MAX_MESSAGE]}... ({len(message):,} characters in all"
                       f"{'; --traceback shows them' if user_traceback else ''})")
        super().__init__(message)
        self.message = message
        self.user_traceback = user_traceback
        self.phase = phase


class UsageError(GradcheckError):
    """Bad flags or option values."""


class LoadError(GradcheckError):
    """The TARGET could not be imported or is not a function."""


class InputError(GradcheckError):
    """Inputs or upstreams that cannot be read or do not fit the function."""


class FunctionError(GradcheckError):
    """The user's function raised, crashed the process, or hit a time or memory limit."""

    exit_code = ExitCode.FUNCTION_ERROR


class InternalError(GradcheckError):
    """gradcheck or TensorFlow itself failed: a bug of ours, or a native crash with no verdict."""

    exit_code = ExitCode.INTERNAL_ERROR


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM: `reason` says which; `finished` holds what had finished, so that it
    can still be reported (the supervisor's results by job index, a run's RunResult)."""

    def __init__(self, reason: str = "interrupted (Ctrl-C)", finished: Any = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.finished: Any = {} if finished is None else finished
