"""Worker processes as the machine sees them: the fork server that starts them (or "spawn"
where there is none), each worker (a process group of its own, its memory, its crash), the
idle ones kept for later checks, and the __main__ script a worker imports again."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import multiprocessing
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gradcheck.errors import GradcheckError, InternalError, Phase, UsageError
from gradcheck.processes import failures, worker
from gradcheck.processes.protocol import Job, JobRequest
from gradcheck.processes.trees import end_tree, resident_memory, short_socket_folder, stat_fields

# Idle workers kept for later checks of this process (tests, the Python API).
MAX_SPARES = 4


def context() -> Any:
    """The fork server's context, its preloading set (workers start in a fraction of a second
    after the first), or "spawn" where fork servers do not exist."""
    short_socket_folder()  # a long TMPDIR would break every AF_UNIX socket multiprocessing binds
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["gradcheck.processes.preimported"])
    return context


def _stop_fork_server() -> None:
    """Without waiting for the interpreter teardown of a process that imported TensorFlow (it
    holds this process's stdout and stderr until it ends)."""
    from multiprocessing import forkserver

    server: Any = forkserver._forkserver
    pid = getattr(server, "_forkserver_pid", None)
    if pid is not None:
        with contextlib.suppress(Exception):
            os.kill(pid, signal.SIGKILL)
            server._stop()


def _ended(pid: int) -> bool:
    fields = stat_fields(pid)
    if fields is not None:
        return fields[0] in ("Z", "X")
    return not os.path.exists(f"/proc/{pid}") if os.path.isdir("/proc") else False


def fork_server_gone(wait: float = 0.0) -> bool:
    """The fork server was killed (e.g. by the out-of-memory killer), looking for up to `wait`
    seconds (its pipes close just before it becomes a zombie); it is not reaped here, so that
    multiprocessing starts a new one when the next worker is needed."""
    if context().get_start_method() != "forkserver":
        return False
    from multiprocessing import forkserver

    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    if pid is None:
        return False
    deadline = time.monotonic() + wait
    while not _ended(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


# multiprocessing's exit code for a worker whose fork server can no longer say how it ended.
LOST_BY_FORK_SERVER = 255
FORK_SERVER_GONE = ("the fork server process that starts gradcheck's workers was killed (perhaps"
                    " by the system's out-of-memory killer)")


@contextlib.contextmanager
def main_module_hidden(hide: bool) -> Iterator[None]:
    """Without a __main__ to re-run, a spawned worker starts faster and a script that starts
    one needs no `if __name__ == "__main__"` guard; only jobs that use __main__ need it."""
    main = sys.modules.get("__main__")
    if hide and main is not None:
        sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


@contextlib.contextmanager
def safe_path() -> Iterator[None]:
    """A fork server or spawned worker starts as `python -c ...`, which would put the current
    folder first on sys.path: a user's random.py there would break multiprocessing's own
    imports before gradcheck could say so. The user's folders come from gradcheck's sys.path."""
    before = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYTHONSAFEPATH"]
        else:
            os.environ["PYTHONSAFEPATH"] = before


_MAIN_GUARD = re.compile(r"""__name__\s*==\s*['"]__main__['"]|['"]__main__['"]\s*==\s*__name__""")


def require_main_guard() -> None:
    """A worker imports the __main__ script again (as multiprocessing does) to find f in it: a
    script whose top-level code checks without an `if __name__ == "__main__":` guard would
    start workers from its workers. Say so now, instead of multiprocessing's bootstrapping
    error from inside a worker."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if not path or not str(path).endswith(".py"):
        return
    try:
        source = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    if not _MAIN_GUARD.search(source):
        name = Path(path).name
        raise UsageError(
            f"isolate=True runs f in a worker process, which imports {name} again to find f:"
            f" put the top-level code of {name} that calls gradcheck under"
            ' `if __name__ == "__main__":`, or define f in a module of its own')


class WorkerProcess:
    """One worker process, its connection, and what it is doing."""

    def __init__(self, with_main: bool = False, threads: int | None = None) -> None:
        processes = context()
        # The worker's temporary files (its fault dump, a multiworker check's folder): removed
        # with it however it ends.
        self.scratch = tempfile.mkdtemp(prefix="gradcheck-worker-")
        self.fault_path = os.path.join(self.scratch, worker.FAULT_FILE)
        self.connection, child = processes.Pipe()
        self.with_main = with_main
        self.process = processes.Process(target=worker.main, name="gradcheck-worker",
                                       args=(child, self.scratch, threads))
        # A check's time limit runs from when a worker was free to take it, so it counts the
        # start-up of a worker started for it: the limit bounds what the user waits.
        self.born = self.free_since = time.monotonic()
        try:
            with main_module_hidden(not with_main), safe_path():
                self.process.start()  # with a fork server: once it has imported TensorFlow
        except (OSError, EOFError, ValueError) as exc:  # the fork server died as it forked
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise InternalError(f"cannot start a worker process: {FORK_SERVER_GONE}"
                                f" ({type(exc).__name__}: {exc}); run the command again") from exc
        finally:
            child.close()
        # Before multiprocessing's own exit handler, which would wait for idle workers.
        atexit.unregister(stop_workers)
        atexit.register(stop_workers)
        self.clock_from = 0.0
        self.ready = False
        self.broken: str | GradcheckError | None = None
        self.main_thread: int | None = None
        self.index: int | None = None
        self.job: Job | None = None
        self.sent_at = 0.0
        self.phase = Phase(worker.STARTING)
        self.where: str | None = None
        self.stack: str | None = None
        self.reserved: int | None = None  # the retry this new worker was started for

    def send(self, index: int, job: Job, clock_from: float) -> None:
        now = time.monotonic()
        self.clock_from = min(clock_from, now)
        # The worker is told the time left, so that it knows when its last second begins.
        left = None if job.timeout is None else job.timeout - (now - self.clock_from)
        sent = dataclasses.replace(  # pickled without its callbacks
            job, timeout=left, settings=dataclasses.replace(job.settings, scratch=self.scratch))
        environ = {"TF_CPP_MIN_LOG_LEVEL": "3", **os.environ}  # as gradcheck.engine.runtime does
        self.connection.send(JobRequest(sent, os.getcwd(), environ))
        self.index, self.job, self.sent_at = index, job, now
        self.phase = Phase(f"the start of the check of {job.target}")
        self.where = self.stack = None

    def deadline(self) -> float | None:
        if self.job is None or self.job.timeout is None:
            return None
        return self.clock_from + self.job.timeout

    def startup(self) -> float:
        """How much of the job's time went to waiting for this worker to start."""
        return self.sent_at - self.clock_from

    def memory(self) -> int | None:
        """Resident memory in bytes, or None."""
        return None if self.process.pid is None else resident_memory(self.process.pid)

    def crash(self) -> failures.Crash:
        exitcode = self.process.exitcode or 0
        try:
            with open(self.fault_path, encoding="utf-8", errors="replace") as dump:
                frames = failures.read_fault_dump(dump.read(), self.main_thread)
        except OSError:
            frames = ()
        return failures.Crash(-exitcode if exitcode < 0 else None, exitcode, frames)

    def kill(self) -> None:
        """The worker and every process it started, at any depth (its process group, and its
        descendants in sessions of their own), ended before this returns: children of f would
        otherwise keep running, and the user's stdout and stderr open, after gradcheck ends.
        Then its temporary files."""
        pid = self.process.pid
        if pid is not None:  # the worker leads its own group, and is the subreaper of f's
            end_tree(pid, include_root=self.process.exitcode is None, group=pid)
        with contextlib.suppress(Exception):
            self.process.kill()
            self.process.join(5)
        with contextlib.suppress(Exception):
            self.connection.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


SPARES: list[WorkerProcess] = []


def stop_workers() -> None:
    """Stop the idle workers and the fork server (as this process ends)."""
    while SPARES:
        SPARES.pop().kill()
    _stop_fork_server()


def threads_per_worker(parallel: int) -> int | None:
    """TensorFlow's thread pools of workers that run side by side share the cores between them
    (each would otherwise start a pool as large as the machine)."""
    return max(1, (os.cpu_count() or 1) // parallel) if parallel > 1 else None


def prestart(count: int = 1) -> None:
    """Start importing TensorFlow now, while the caller gets on with other work: in the fork
    server (without waiting), or else in `count` workers."""
    if context().get_start_method() == "forkserver":
        from multiprocessing import forkserver

        with safe_path():
            forkserver.ensure_running()
        return
    while len(SPARES) < min(count, MAX_SPARES):
        SPARES.append(WorkerProcess(threads=threads_per_worker(count)))
