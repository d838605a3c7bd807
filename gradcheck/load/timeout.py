"""A wall-clock limit on a check: SIGALRM raises inside the user's Python code (main thread)."""

from __future__ import annotations

import signal
import threading
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from gradcheck.errors import FunctionError, UsageError

T = TypeVar("T")


class TimeLimitExceeded(BaseException):
    """Raised by the alarm; a BaseException so `except Exception` in user code cannot eat it."""


def _raise_timeout(signum: int, frame: Any) -> None:
    raise TimeLimitExceeded


def validate_timeout(seconds: float | None, flag: str = "--timeout") -> None:
    if seconds is None:
        return
    if not seconds > 0 or seconds == float("inf"):
        raise UsageError(f"{flag} must be a positive number of seconds, got {seconds}")
    if not hasattr(signal, "setitimer"):
        raise UsageError(f"{flag} needs signal.setitimer, which this platform does not have")


def run_with_time_limit(action: Callable[[], T], seconds: float | None, function: str,
                        flag: str = "--timeout") -> T:
    """action(), or FunctionError naming the user's line that was running when time ran out."""
    if seconds is None:
        return action()
    validate_timeout(seconds, flag)
    if threading.current_thread() is not threading.main_thread():
        raise UsageError(f"{flag} works only in the main thread")
    previous = signal.signal(signal.SIGALRM, _raise_timeout)
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return action()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except TimeLimitExceeded as exc:
        from gradcheck.load.locations import (
            innermost_user_frame,  # it imports target, which needs us
        )

        where = innermost_user_frame(traceback.extract_tb(exc.__traceback__))
        limit = f"{seconds:g}s ({flag} {seconds:g})"
        if where is None:
            message = f"checking {function} did not finish within {limit}"
        else:
            message = f"{function} did not finish within {limit}; it was running {where}"
        raise FunctionError(message, user_traceback="".join(traceback.format_exception(exc))
                            ) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
