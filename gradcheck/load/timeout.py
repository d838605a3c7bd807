"""Time limits on checks: validating --timeout. The limit itself is enforced by the parent of
the worker process that runs the check (gradcheck.isolation), which kills it at the deadline."""

from __future__ import annotations

from gradcheck.errors import UsageError


def validate_timeout(seconds: float | None, flag: str = "--timeout") -> None:
    if seconds is None:
        return
    if not seconds > 0 or seconds == float("inf"):
        raise UsageError(f"{flag} must be a positive number of seconds, got {seconds}")
