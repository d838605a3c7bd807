"""The worker process: imports TensorFlow, runs the checks the parent sends, and sends back each
report (or error), the phases as they begin, progress, and, just before a time limit, the line
that was running. Its faulthandler dump tells the parent where a native crash happened."""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import gc
import os
import pickle
import signal
import sys
import tempfile
import threading
import time
import traceback
from typing import Any

from gradcheck.errors import Phase
from gradcheck.processes.protocol import (
    Began,
    Broken,
    JobRequest,
    Outcome,
    Progress,
    Ready,
    Reply,
    Where,
)
from gradcheck.processes.trees import become_subreaper, end_tree

# The worker's faulthandler dump, in its scratch folder.
FAULT_FILE = "fault.txt"
# Phase reported until the first check begins.
STARTING = "the start-up of TensorFlow in a new worker process"
# In the last SAMPLE_WINDOW seconds before its time limit, a check's stack is sampled every
# SAMPLE_EVERY seconds, so the parent knows the user's line that was running when it stopped.
SAMPLE_WINDOW = 1.0
SAMPLE_EVERY = 0.05
# Progress messages are sent at most this often (the last one of a task always).
PROGRESS_INTERVAL = 0.1
# glibc's mallopt parameters: every block from the heap (M_MMAP_MAX 0), and up to 256 MiB of
# freed memory at its top kept for the next blocks (M_TRIM_THRESHOLD), grown 64 MiB at a time
# (M_TOP_PAD).
MALLOC_SETTINGS = ((-4, 0), (-1, 256 << 20), (-2, 64 << 20))


class Channel:
    """The connection to the parent, safe to use from the watchdog threads too."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.lock = threading.Lock()
        self.last_progress = 0.0

    def send(self, message: Reply, unless: threading.Event | None = None) -> None:
        """Send, unless `unless` is set by then (a sample taken as its check ended)."""
        with self.lock:
            if unless is None or not unless.is_set():
                self.connection.send(message)

    def phase(self, what: Phase | str) -> None:
        self.send(Began(Phase.of(what)))

    def progress(self, task: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total or now - self.last_progress >= PROGRESS_INTERVAL:
            self.last_progress = now
            self.send(Progress(task, done, total))


def _exit_with_parent(scratch: str) -> None:
    """A worker never outlives the command that started it (even one killed with SIGKILL): the
    parent's end of a pipe closes when it ends, whichever process forked this one. Whatever f
    started (which holds the user's pipes) ends with it, and its temporary files go."""
    import multiprocessing
    import shutil
    from multiprocessing.connection import wait

    parent = multiprocessing.parent_process()
    if parent is not None:
        wait([parent.sentinel])
    with contextlib.suppress(Exception):
        end_tree(os.getpid(), include_root=False, group=os.getpgid(0), wait=2.0)
    shutil.rmtree(scratch, ignore_errors=True)
    os._exit(1)


def _watch(channel: Channel, main_thread: int, timeout: float, stop: threading.Event) -> None:
    """Near the time limit, send the innermost line of the user's code that the main thread is
    running (with its stack) whenever it changes."""
    from gradcheck.load.locations import innermost_user_frame

    if stop.wait(min(max(0.0, timeout - SAMPLE_WINDOW), threading.TIMEOUT_MAX)):
        return
    last: str | None = None
    while not stop.is_set():
        frame = sys._current_frames().get(main_thread)
        if frame is not None:
            frames = traceback.extract_stack(frame)
            found = innermost_user_frame(frames)
            where = None if found is None else str(found)
            if where is not None and where != last:
                last = where
                channel.send(Where(where, "Stack when the time limit was reached (most recent"
                                   " call last):\n" + "".join(traceback.format_list(frames))),
                             unless=stop)
        stop.wait(SAMPLE_EVERY)


def _session(stack: contextlib.ExitStack, session: str | None) -> contextlib.ExitStack:
    """Checks of one session (`gradcheck run`) share loaded modules and observed gradients."""
    stack.close()
    stack = contextlib.ExitStack()
    if session is not None:
        from gradcheck.engine.instrument import observing_custom_gradients
        from gradcheck.targets.modules import module_cache

        stack.enter_context(module_cache())
        stack.enter_context(observing_custom_gradients())
    return stack


def _run(job: Any, channel: Channel) -> Outcome:
    """The check's report or error; never raises."""
    from gradcheck.errors import GradcheckError
    from gradcheck.processes.failures import unexpected_error

    settings = job.settings.reporting_to(channel.phase, channel.progress)
    stop = threading.Event()
    if job.timeout is not None:
        threading.Thread(target=_watch, daemon=True, args=(
            channel, threading.get_ident(), job.timeout, stop)).start()
    start = time.perf_counter()
    try:
        channel.phase(f"the loading of {job.target} and its inputs")
        report = job.function(*job.args, job.options, settings)
        return Outcome(report, None, time.perf_counter() - start)
    except GradcheckError as error:
        return Outcome(None, error, time.perf_counter() - start)
    except BaseException as exc:  # noqa: BLE001 - whatever the user's code raises, even exit
        return Outcome(None, unexpected_error(exc, job.name), time.perf_counter() - start)
    finally:
        stop.set()
        if "tensorflow" in sys.modules:
            from gradcheck.engine.runtime import enable_eager_again

            enable_eager_again()  # a TF1 module imported by this job must not stop the next
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()


def _end_what_f_started() -> bool:
    """The processes f started (subprocesses, multiprocessing children and theirs, at any
    depth) end with its check, before its result is sent: the worker leads a process group of
    its own and is the subreaper of its descendants (Linux), so they are its group's other
    members and its descendants, a daemon in a session of its own included. True when there
    were any."""
    group = os.getpid()
    with contextlib.suppress(OSError):
        if os.getpgid(0) != group:
            return False
    ended = end_tree(group, include_root=False, group=group)
    import multiprocessing

    multiprocessing.active_children()  # reaps the multiprocessing children just ended
    return bool(ended)


def _send_result(channel: Channel, outcome: Outcome) -> None:
    try:
        channel.send(outcome)
    except Exception as exc:  # an unpicklable report or error: say so rather than hang
        from gradcheck.errors import InternalError

        channel.send(Outcome(None, InternalError(
            f"internal error: the worker could not send its result ({exc}); please report it"),
            outcome.seconds))


def _reuse_freed_memory() -> None:
    """Freed arrays' memory is reused rather than returned to the kernel.

    Every evaluation of f allocates and frees input-sized arrays (TensorFlow's tensors,
    NumPy's); by default glibc maps each large one afresh and unmaps it when freed, and at
    10^7 elements the page faults cost more than f itself. Only in a worker: a library must
    not retune the allocator of its caller's process."""
    import platform

    if platform.libc_ver()[0] != "glibc":
        return
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None)
        for parameter, value in MALLOC_SETTINGS:
            libc.mallopt(parameter, value)


def _apply(cwd: str, environ: dict[str, str]) -> None:
    """The parent's current directory and environment, as an in-process check would see."""
    with contextlib.suppress(OSError):
        os.chdir(cwd)
    if dict(os.environ) != environ:
        os.environ.clear()
        os.environ.update(environ)


def _not_started(exc: BaseException) -> Any:
    """Why TensorFlow cannot start: a user's file shadowing a standard-library module, or
    TensorFlow not installed, is the user's to fix (a usage error), not a crash."""
    from gradcheck.errors import GradcheckError, UsageError
    from gradcheck.processes.failures import shadowing_note

    said = f"the worker process could not import TensorFlow and gradcheck's checks:" \
           f" {type(exc).__name__}: {exc}"
    note = shadowing_note(exc)
    if isinstance(exc, GradcheckError):
        return exc
    return UsageError(f"{said}{note}") if note else said


def main(connection: Any, scratch: str, threads: int | None = None) -> None:
    """Entry point of a worker process (started by gradcheck.processes.supervisor); `scratch` is
    the folder of its temporary files, which its parent removes; `threads` caps TensorFlow's thread
    pools."""
    with contextlib.suppress(OSError):  # a session of its own: killed with what f starts
        os.setsid()
    become_subreaper()  # what f starts and orphans stays under this process, to be ended
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    os.dup2(2, 1)  # the user's prints go to stderr: stdout carries only gradcheck's report
    threading.Thread(target=_exit_with_parent, args=(scratch,), daemon=True).start()
    # TensorFlow's temporary files (autograph's generated modules, which it removes only at an
    # exit that a killed worker never reaches) and f's go where the parent removes them.
    tempfile.tempdir = scratch
    fault_file = open(os.path.join(scratch, FAULT_FILE), "w")  # noqa: SIM115 - kept open
    faulthandler.enable(fault_file, all_threads=True)
    channel = Channel(connection)
    _reuse_freed_memory()
    try:
        from gradcheck.pipeline import preload

        preload(threads)
    except BaseException as exc:  # noqa: BLE001 - TensorFlow itself cannot start
        channel.send(Broken(_not_started(exc)))
        return
    # TensorFlow's objects live as long as the process: the garbage collector skips them from
    # now on (each full collection would walk all 330 000 of them, and touch the fork server's
    # shared pages).
    gc.freeze()
    channel.send(Ready(threading.get_ident()))
    stack = contextlib.ExitStack()
    session: str | None = None
    while True:
        try:
            data = connection.recv_bytes()
        except (EOFError, OSError):
            break
        try:
            message = pickle.loads(data)
        except Exception as exc:  # e.g. f defined in an interactive session
            from gradcheck.errors import UsageError

            channel.send(Outcome(None, UsageError(
                f"the worker process cannot load the check: {type(exc).__name__}: {exc}"), 0.0))
            continue
        if not isinstance(message, JobRequest):
            break
        job = message.job
        _apply(message.cwd, message.environ)
        if job.session != session:
            stack, session = _session(stack, job.session), job.session
        outcome = _run(job, channel)
        retiring = _end_what_f_started()
        _send_result(channel, dataclasses.replace(outcome, retiring=retiring))
        if retiring:  # exit finalizers would wait on what was ended (a pool's workers)
            os._exit(0)
    stack.close()

