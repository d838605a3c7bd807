"""Run checks in worker processes (gradcheck.processes.workers), forked from a fork server that
has imported TensorFlow once (the command line itself never imports it; "spawn" where there is no
fork server). A worker that crashes, outlives its time limit or outgrows its memory cap is
killed and reported with the phase it was in; after a native crash the check runs again,
without vectorisation, in a new worker, so that a verdict is still given where TensorFlow
allows one. Idle workers are kept for the next checks of this process."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

from gradcheck.errors import GradcheckError, InternalError, Interrupted, Phase, UsageError
from gradcheck.evidence.notes import Retried
from gradcheck.options import memory_cap
from gradcheck.processes import failures, worker
from gradcheck.processes.protocol import Began, Broken, Job, Outcome, Progress, Ready, Reply, Where
from gradcheck.processes.workers import (
    FORK_SERVER_GONE,
    LOST_BY_FORK_SERVER,
    MAX_SPARES,
    SPARES,
    WorkerProcess,
    fork_server_gone,
    prestart,
    require_main_guard,
    stop_workers,
    threads_per_worker,
)
from gradcheck.report import Report

# A worker that has not imported TensorFlow after this long is given up.
STARTUP_LIMIT = 120.0
# How often a busy worker's memory is looked at.
POLL_SECONDS = 0.25
# The phase of tape.jacobian's vectorised path (pfor), as engine/recording.py announces it.
VECTORISED_JACOBIAN = "the vectorised tape.jacobian"


@dataclass(frozen=True)
class JobResult:
    report: Report | None
    error: GradcheckError | None
    seconds: float


@dataclass(frozen=True)
class Events:
    """Whom the supervisor tells as jobs advance, each called with the job's index: `started`
    (handed to a worker), `phase(index, phase)` (about to run), `progress(index, task, done,
    total)` (the core's progress), `notice(index, message)` (crashed, runs again) and
    `finished(index, result)`."""

    started: Callable[[int], Any] | None = None
    phase: Callable[[int, Phase], Any] | None = None
    progress: Callable[[int, str, int, int], Any] | None = None
    notice: Callable[[int, str], Any] | None = None
    finished: Callable[[int, JobResult], Any] | None = None


def _tell(listener: Callable[..., Any] | None, *arguments: Any) -> None:
    if listener is not None:
        listener(*arguments)


def _needs_main(job: Job) -> bool:
    """The job names something defined in the __main__ module (e.g. a script's f)."""
    return any(getattr(item, "__module__", None) == "__main__"
               for item in (job.function, *job.args))


def run_jobs(jobs: Sequence[Job], parallel: int = 1, events: Events | None = None
             ) -> list[JobResult]:
    """Run the jobs in up to `parallel` workers; results in the jobs' order."""
    return _Supervisor(jobs, parallel, events or Events()).run()


class _Supervisor:
    def __init__(self, jobs: Sequence[Job], parallel: int, events: Events) -> None:
        self.jobs = list(jobs)
        self.parallel = max(1, min(parallel, len(self.jobs)))
        self.events = events
        self.with_main = any(_needs_main(job) for job in self.jobs)
        self.pending = deque(range(len(self.jobs)))
        # index: (the retry, why, whether pfor's tape.jacobian crashed)
        self.retries: dict[int, tuple[Job, str, bool]] = {}
        self.results: dict[int, JobResult] = {}
        self.workers: list[WorkerProcess] = []

    def run(self) -> list[JobResult]:
        if not self.jobs:
            return []
        if self.with_main:
            require_main_guard()
        self.began = time.monotonic()
        for spare in list(SPARES):
            if len(self.workers) < self.parallel and spare.with_main >= self.with_main:
                SPARES.remove(spare)
                self.workers.append(spare)
        try:
            while len(self.results) < len(self.jobs):
                self._top_up()
                self._dispatch()
                self._wait()
                for member in list(self.workers):
                    self._look_at(member)
        except BaseException as exc:
            for member in self.workers:
                member.kill()
            self.workers = []
            if isinstance(exc, KeyboardInterrupt):
                raise Interrupted(getattr(exc, "reason", Interrupted().reason),
                                  dict(self.results)) from None
            raise
        finally:
            for member in self.workers:
                if member.index is None and member.broken is None and len(SPARES) < MAX_SPARES:
                    SPARES.append(member)
                else:
                    member.kill()
        return [self.results[index] for index in range(len(self.jobs))]

    def _top_up(self) -> None:
        """Enough workers for the pending jobs, up to `parallel`."""
        free = sum(1 for w in self.workers if w.index is None and w.reserved is None)
        while len(self.workers) < self.parallel and len(self.pending) > free:
            self.workers.append(WorkerProcess(self.with_main, threads_per_worker(self.parallel)))
            free += 1

    def _next_job(self, member: WorkerProcess, take: bool) -> tuple[int, Job] | None:
        """The job this worker is to run next (its retry, or the next pending one)."""
        if member.reserved is not None:
            index = member.reserved
            if take:
                member.reserved = None
            return index, self.retries[index][0]
        if not self.pending:
            return None
        index = self.pending.popleft() if take else self.pending[0]
        return index, self.jobs[index]

    def _dispatch(self) -> None:
        for member in self.workers:
            if not member.ready or member.index is not None:
                continue
            taken = self._next_job(member, take=True)
            if taken is None:
                continue
            index, job = taken
            clock_from = max(member.free_since, self.began)
            if self._out_of_time_starting(index, job, clock_from):
                continue
            try:
                member.send(index, job, clock_from)
            except Exception as exc:  # e.g. a function that cannot be pickled
                self._finish(index, None, UsageError(
                    f"cannot send the check of {job.target} to a worker process: {exc}"), 0.0)
                member.index = member.job = None
                continue
            _tell(self.events.started, index)

    def _out_of_time_starting(self, index: int, job: Job, clock_from: float) -> bool:
        """The job's time limit ran out while its worker was starting: it fails so."""
        waited = time.monotonic() - clock_from
        if job.timeout is None or waited < job.timeout:
            return False
        self._finish(index, None, failures.startup_timeout_error(
            job.name, job.timeout, job.timeout_flag, worker.STARTING, waited), waited)
        return True

    def _wait(self) -> None:
        now = time.monotonic()
        timeout = POLL_SECONDS
        for member in self.workers:
            deadline = member.deadline()
            if deadline is not None:
                timeout = min(timeout, max(0.0, deadline - now))
        objects = [w.connection for w in self.workers] + [w.process.sentinel for w in self.workers]
        wait(objects, timeout)

    def _look_at(self, member: WorkerProcess) -> None:
        with contextlib.suppress(EOFError, OSError):
            while member.connection.poll():
                self._receive(member, member.connection.recv())
        if not member.process.is_alive():
            self._died(member)
            return
        job = member.job
        if job is None or member.index is None:
            if not member.ready:
                self._starting(member)
            return
        deadline = member.deadline()
        if deadline is not None and time.monotonic() >= deadline:
            assert job.timeout is not None
            self._remove(member)
            self._finish(member.index, None, failures.timeout_error(
                job.name, job.timeout, job.timeout_flag, member.phase.text, member.where,
                member.stack, member.startup()), time.monotonic() - member.sent_at)
            return
        used = member.memory() if job.memory_limit is not None else None
        if used is not None and job.memory_limit is not None and used > job.memory_limit:
            self._remove(member)
            error = failures.memory_error(job.name, used, job.memory_limit, member.phase.text)
            seconds = time.monotonic() - member.sent_at
            if member.phase.vectorised:
                self._retry(member.index, job, error, seconds)
            else:
                self._finish(member.index, None, error, seconds)

    def _starting(self, member: WorkerProcess) -> None:
        """A worker still starting: given up after STARTUP_LIMIT, or once the time limit of
        the check it is to take has run out."""
        if time.monotonic() - member.born > STARTUP_LIMIT:
            member.broken = f"TensorFlow did not start within {STARTUP_LIMIT:g}s"
            member.process.kill()
            return
        upcoming = self._next_job(member, take=False)
        if upcoming is not None and self._out_of_time_starting(
                *upcoming, max(member.free_since, self.began)):
            self._next_job(member, take=True)
            self._remove(member)

    def _receive(self, member: WorkerProcess, message: Reply) -> None:
        index = member.index
        match message:
            case Ready(main_thread=thread):
                member.ready, member.main_thread = True, thread
            case Broken(reason=reason):
                member.broken = reason
            case Began(phase=phase) if index is not None:
                member.phase = phase
                _tell(self.events.phase, index, phase)
            case Progress(task=task, done=done, total=total) if index is not None:
                _tell(self.events.progress, index, task, done, total)
            case Where(line=line, stack=stack):
                member.where, member.stack = line, stack
            case Outcome(report=report, error=error, seconds=seconds,
                         retiring=retiring) if index is not None:
                member.index = member.job = None
                member.free_since = time.monotonic()
                self._finish(index, report, error, seconds)
                if retiring:
                    self._remove(member)

    def _died(self, member: WorkerProcess) -> None:
        crash = member.crash()  # before the worker's fault dump is removed
        self._remove(member)
        gone = crash.signum is None and crash.exitcode == LOST_BY_FORK_SERVER \
            and fork_server_gone(wait=2.0)
        job, index = member.job, member.index
        if job is None or index is None:
            if member.ready and member.broken is None and member.reserved is None:
                return  # an idle worker went away: another is started when needed
            # It could not start: the job it was meant for gets the reason.
            failed = member.reserved if member.reserved is not None else (
                self.pending.popleft() if self.pending else None)
            if failed is not None:
                reason = member.broken or (f"{FORK_SERVER_GONE}; run the command again"
                                           if gone else failures.describe_crash(
                                               crash, self.jobs[failed].name, worker.STARTING))
                self._finish(failed, None, reason if isinstance(reason, GradcheckError)
                             else InternalError(reason), 0.0)
            return
        phase = member.phase.text
        if gone:
            self._finish(index, None, InternalError(
                f"{FORK_SERVER_GONE} while the check of {job.target} was running"
                f" ({phase}), which ended the check; run the command again",
                phase=phase), time.monotonic() - member.sent_at)
            return
        error = failures.crash_error(crash, failures.describe_crash(crash, job.name, phase), phase)
        seconds = time.monotonic() - member.sent_at
        if crash.signum is None or (crash.by_user and not member.phase.vectorised):
            self._finish(index, None, error, seconds)  # it would crash again
        else:
            self._retry(index, job, error, seconds)

    def _retry(self, index: int, job: Job, error: GradcheckError, seconds: float) -> None:
        """Run the job again without vectorisation in a new worker (unless it was off)."""
        if not job.settings.vectorise:
            self._finish(index, None, error, seconds)
            return
        retry = dataclasses.replace(job, settings=job.settings.without_vectorisation())
        self.retries[index] = (retry, error.message,
                               (error.phase or "").startswith(VECTORISED_JACOBIAN))
        _tell(self.events.notice, index, f"{error.message}; checking again without vectorisation")
        fresh = WorkerProcess(self.with_main, threads_per_worker(self.parallel))
        fresh.reserved = index
        self.workers.append(fresh)

    def _remove(self, member: WorkerProcess) -> None:
        member.kill()
        if member in self.workers:
            self.workers.remove(member)

    def _finish(self, index: int, report: Report | None, error: GradcheckError | None,
                seconds: float) -> None:
        if index in self.retries:
            _, why, jacobian = self.retries[index]
            if report is not None:
                report = dataclasses.replace(report, notes=(Retried(why, jacobian),
                                                            *report.notes))
            if error is not None:
                error = type(error)(
                    f"{why}; checked again without vectorisation: {error.message}",
                    user_traceback=error.user_traceback, phase=error.phase)
        result = JobResult(report, error, seconds)
        self.results[index] = result
        _tell(self.events.finished, index, result)


__all__ = ["Events", "Job", "JobResult", "memory_cap", "prestart", "run_jobs", "stop_workers",
           "threads_per_worker"]
