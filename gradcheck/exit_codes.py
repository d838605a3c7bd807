"""The one place that maps outcomes to process exit codes."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    CHECK_FAILED = 1
    USAGE_ERROR = 2
    FUNCTION_ERROR = 3
