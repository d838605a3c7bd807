"""Exit codes (the one place that defines them) and the errors that stop a run before a
report exists, each with its exit code."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    CHECK_FAILED = 1
    USAGE_ERROR = 2
    FUNCTION_ERROR = 3


class GradcheckError(Exception):
    """A problem that ends the run with a one-line message."""

    exit_code: ExitCode = ExitCode.USAGE_ERROR

    def __init__(self, message: str, *, user_traceback: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.user_traceback = user_traceback


class UsageError(GradcheckError):
    """Bad flags or option values."""


class LoadError(GradcheckError):
    """The TARGET could not be imported or is not a function."""


class InputError(GradcheckError):
    """Inputs or upstreams that cannot be read or do not fit the function."""


class FunctionError(GradcheckError):
    """The user's function raised (or hung) while being evaluated."""

    exit_code = ExitCode.FUNCTION_ERROR
