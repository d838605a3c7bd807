"""What went wrong in a worker, as a GradcheckError with the right exit code: a native crash
(read from the worker's faulthandler dump), a time-out, a memory cap, or an unexpected exception
(the user's, exit 3, or gradcheck's own, exit 4: decided by the innermost frame that is not a
library's)."""

from __future__ import annotations

import re
import signal
import traceback
from dataclasses import dataclass
from pathlib import Path

from gradcheck.errors import FunctionError, GradcheckError, InputError, InternalError
from gradcheck.evidence import Location
from gradcheck.load.locations import format_location
from gradcheck.options import memory_cap_rule
from gradcheck.spelling import format_size
from gradcheck.user_code import is_gradcheck_file, is_stdlib_file, is_user_file

_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)")
_FRAME = re.compile(r'^\s+File "(.+)", line (\d+) in (.*)$')
_VERBS = {
    "SIGABRT": "aborted",
    "SIGSEGV": "crashed with a segmentation fault",
    "SIGBUS": "crashed with a bus error",
    "SIGFPE": "crashed with an arithmetic error",
    "SIGILL": "crashed on an illegal instruction",
    "SIGKILL": "was killed",
}


def shadowing_note(exc: BaseException) -> str:
    """"; X.py shadows the standard library's module X: rename it" when a file of the user's
    named like a standard-library module (or TensorFlow, NumPy, Keras; a package by its
    folder) is in the traceback, or was imported as that module (a json.py in the current
    folder breaks whatever imports json after it), else ""."""
    from gradcheck.shadowing import sentence, shadowing_file

    found = shadowing_file(exc)
    if found is None or not is_user_file(found[0]):
        return ""
    return f"; {sentence(*found)}"


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@dataclass(frozen=True)
class Crash:
    """How a worker ended without a report: killed by a signal or exited, and the Python stack
    (innermost first) of the thread that crashed, or of the main thread when the crash happened
    in a thread of TensorFlow's own."""

    signum: int | None
    exitcode: int
    frames: tuple[tuple[str, int, str], ...] = ()  # (file, line, function)

    @property
    def by_user(self) -> bool:
        """The user's own line was running (os.abort(), os.kill(), a C extension of theirs, or
        the standard library called from it, such as ctypes.string_at(0)), or the process
        ended without a signal (os._exit: TensorFlow aborts rather than exits)."""
        if self.signum is None:
            return True
        frames = [frame for frame in self.frames if not is_stdlib_file(frame[0])]
        return bool(frames) and is_user_file(frames[0][0])

    @property
    def user_line(self) -> Location | None:
        for filename, line, _ in self.frames:
            if is_user_file(filename):
                return format_location(filename, line)
        return None


def read_fault_dump(text: str, main_thread: int | None) -> tuple[tuple[str, int, str], ...]:
    """The frames of the crashed thread in a faulthandler dump (the main thread's when the
    crash happened outside Python), innermost first."""
    blocks: list[tuple[bool, int, list[tuple[str, int, str]]]] = []
    for line in text.splitlines():
        header = _THREAD.match(line)
        if header:
            blocks.append((header.group(1) == "Current thread", int(header.group(2), 16), []))
            continue
        frame = _FRAME.match(line)
        if frame and blocks:
            blocks[-1][2].append((frame.group(1), int(frame.group(2)), frame.group(3)))
    chosen = next((b for b in blocks if b[0]), None) or next(
        (b for b in blocks if b[1] == main_thread), None) or (blocks[0] if blocks else None)
    return tuple(chosen[2]) if chosen else ()


def describe_crash(crash: Crash, function: str, phase: str) -> str:
    """One line: who crashed, how (the signal) and during what."""
    if crash.signum is None:
        return (f"the worker process exited with code {crash.exitcode} during {phase} without a"
                f" report: {function} or its module ended the process (os._exit?)")
    name = signal_name(crash.signum)
    verb = _VERBS.get(name, "was killed")
    if crash.by_user:
        return f"{function} {verb} ({name}) during {phase}; it was running {crash.user_line}"
    who = "TensorFlow"
    if crash.frames and is_gradcheck_file(crash.frames[0][0]):
        who = "gradcheck"
    elif name == "SIGKILL":
        who = "the worker process (perhaps the system's out-of-memory killer)"
    called = f" (called from {crash.user_line})" if crash.user_line else ""
    return f"{who} {verb} ({name}) during {phase}{called}"


def crash_error(crash: Crash, message: str, phase: str) -> GradcheckError:
    """Exit 3 when the user's own line crashed the process, 4 when TensorFlow or gradcheck did."""
    kind = FunctionError if crash.by_user else InternalError
    frames = []
    for filename, line, function in crash.frames:
        if Path(filename).name == "worker.py" and is_gradcheck_file(filename):
            break  # the worker's own loop and multiprocessing's start-up: not interesting
        frames.append(f'  File "{filename}", line {line}, in {function}\n')
    stack = "".join(reversed(frames))
    return kind(message, phase=phase, user_traceback="Python stack when the process crashed"
                f" (most recent call last):\n{stack}" if stack else None)


def time_limit(seconds: float, flag: str) -> str:
    return f"{seconds:g}s ({flag} {seconds:g})"


def timeout_error(function: str, seconds: float, flag: str, phase: str, where: str | None,
                  stack: str | None, startup: float = 0.0) -> FunctionError:
    """`startup`: how much of the time limit went to starting the worker process."""
    limit = time_limit(seconds, flag)
    if startup >= 1.0:
        limit = f"{limit[:-1]}, of which TensorFlow's start-up took {startup:.1f}s)"
    message = f"{function} did not finish within {limit} during {phase}"
    if where is not None:
        message += f"; it was running {where}"
    return FunctionError(message, phase=phase, user_traceback=stack)


def startup_timeout_error(function: str, seconds: float, flag: str, phase: str,
                          waited: float) -> FunctionError:
    return FunctionError(
        f"the time limit of {time_limit(seconds, flag)} ran out during {phase} (which took"
        f" {waited:.1f}s), before {function} was called: the limit counts TensorFlow's start-up,"
        " so give it a few seconds more than that", phase=phase)


def memory_error(function: str, used: int, limit: int, phase: str) -> FunctionError:
    return FunctionError(
        f"{function} was stopped during {phase}: the check used {format_size(used)} of memory,"
        f" over the worker's cap of {format_size(limit)} ({memory_cap_rule()})",
        phase=phase)


def unexpected_error(exc: BaseException, function: str) -> GradcheckError:
    """An exception the core did not turn into a GradcheckError. The innermost frame that is
    not a library's decides whose it is: the user's code (exit 3), or gradcheck's (exit 4; a
    gradcheck bug must never look like the user's). Library frames are skipped because
    TensorFlow raises on behalf of whoever called it."""
    from gradcheck.engine.program import first_line

    text = "".join(traceback.format_exception(exc))
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        where = format_location(frame.filename, frame.lineno)
        if is_user_file(frame.filename):
            return FunctionError(f"{function} raised {first_line(exc)} (at {where})"
                                 f"{shadowing_note(exc)}", user_traceback=text)
        if is_gradcheck_file(frame.filename) and isinstance(exc, RecursionError):
            return InputError(f"the arguments or the result of {function} are nested deeper"
                              " than Python's recursion limit allows gradcheck to walk"
                              " (RecursionError); flatten them", user_traceback=text)
        if is_gradcheck_file(frame.filename):
            return InternalError(f"internal error while checking {function}: {first_line(exc)}"
                                 f" (at {where}){shadowing_note(exc)}; please report it",
                                 user_traceback=text)
    return InternalError(f"internal error while checking {function}: {first_line(exc)}"
                         f"{shadowing_note(exc)}; please report it", user_traceback=text)
