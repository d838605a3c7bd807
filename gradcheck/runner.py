"""`gradcheck run`: every configured check in a worker process, up to N at a time, results in
the configuration's order; a crash, a time-out or an error stops only its own check."""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Callable, Sequence
from typing import Any

from gradcheck.check_settings import CheckSettings
from gradcheck.errors import ExitCode, Interrupted
from gradcheck.load.config import CheckConfig
from gradcheck.options import DEFAULT_MAX_MEMORY
from gradcheck.processes.supervisor import Events, Job, JobResult, memory_cap, run_jobs
from gradcheck.report import CheckOutcome, RunResult
from gradcheck.spelling import format_size

_SESSIONS = itertools.count()
# What a worker that has imported TensorFlow and run a small check holds (measured: 380 MiB).
WORKER_MEMORY = 512 << 20


def check_job(check: CheckConfig, timeout: float | None = None,
              session: str | None = None, keep_blocks: bool = False) -> Job:
    """The worker job of one configured check; `timeout` applies when it has none of its own."""
    from gradcheck.pipeline import TargetRequest, check_request

    request = TargetRequest(
        target=check.load_target, path=check.path, input_specs=check.input,
        shapes=check.shape, inputs_attr=check.inputs, upstream_specs=check.upstream,
    )
    own = check.timeout is not None
    return Job(check_request, (request,), check.options,
               name=check.target.rpartition(":")[2], target=check.target,
               timeout=check.timeout if own else timeout, timeout_flag="timeout" if own
               else "--timeout", memory_limit=memory_cap(DEFAULT_MAX_MEMORY), session=session,
               settings=CheckSettings(keep_blocks=keep_blocks))


def outcome_of(check: CheckConfig, result: JobResult) -> CheckOutcome:
    if result.report is None:
        error = result.error
        assert error is not None
        return CheckOutcome(check.name, check.target, None, error.exit_code, result.seconds,
                          error.message, error.user_traceback, error.phase)
    report = dataclasses.replace(result.report, target=check.target)
    return CheckOutcome(check.name, check.target, report, report.exit_code, result.seconds)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def parse_jobs(text: str) -> int:
    """-j N or auto: the cores this process may use that are idle (by the load average), at
    least one; workers beyond the idle cores only slow each other down."""
    if text.strip().lower() == "auto":
        try:
            busy = int(os.getloadavg()[0])
        except (AttributeError, OSError):
            busy = 0
        return max(1, usable_cores() - busy)
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        from gradcheck.errors import UsageError

        raise UsageError(f"-j {text!r} must be a positive number of workers or auto")
    return value


def cap_workers(requested: int, checks: int, cores: int, available: int | None,
                per_worker: int = WORKER_MEMORY) -> tuple[int, str | None]:
    """Workers to start for `checks` checks: no more than the cores, nor than the available
    memory holds (each worker imports TensorFlow); with a note when that is fewer than asked."""
    wanted = max(1, min(requested, checks))
    by_memory = max(1, available // per_worker) if available is not None else wanted
    workers = max(1, min(wanted, cores, by_memory))
    if workers == wanted:
        return workers, None
    why = f"{cores} core{'s' if cores != 1 else ''}"
    if by_memory < min(wanted, cores):
        assert available is not None
        why = (f"{format_size(available)} of memory available, about {format_size(per_worker)}"
               " per worker")
    return workers, (f"-j {requested}: running {workers} check{'s' if workers != 1 else ''} at"
                     f" a time ({why})")


def run_all(checks: Sequence[CheckConfig], timeout: float | None = None,
            progress: Callable[[CheckConfig, CheckOutcome | None], Any] | None = None,
            jobs: int = 1,
            notice: Callable[[CheckConfig, str], Any] | None = None,
            keep_blocks: bool = False) -> RunResult:
    """Run every check, `jobs` at a time (on Ctrl-C, Interrupted carries the RunResult of what
    had finished). `progress(check, None)` when a check starts and
    `(check, outcome)` when it ends; `notice(check, message)` when it crashed and runs again.
    A worker runs checks one after another, loading each module once for all of them."""
    session = f"run-{os.getpid()}-{next(_SESSIONS)}"
    events = Events(
        started=None if progress is None else lambda i: progress(checks[i], None),
        finished=None if progress is None
        else lambda i, result: progress(checks[i], outcome_of(checks[i], result)),
        notice=None if notice is None else lambda i, message: notice(checks[i], message))
    try:
        results = run_jobs([check_job(check, timeout, session, keep_blocks) for check in checks],
                           jobs, events)
    except Interrupted as stop:  # what had finished goes with it, to be reported
        raise Interrupted(stop.reason, RunResult(tuple(
            outcome_of(check, stop.finished[index]) if index in stop.finished
            else CheckOutcome(check.name, check.target, None, ExitCode.INTERRUPTED,
                              error=f"not finished: {stop.reason}")
            for index, check in enumerate(checks)))) from None
    return RunResult(tuple(outcome_of(check, result) for check, result in zip(checks, results)))


def outcome_dict(outcome: CheckOutcome) -> dict[str, Any]:
    """The single-target JSON report (or error object), with the check's name and time."""
    from gradcheck.render.json_format import error_dict, report_dict

    if outcome.report is not None:
        data = report_dict(outcome.report)
    else:
        data = error_dict(outcome.error or "error", int(outcome.exit_code), outcome.target,
                          outcome.phase)
    return {"name": outcome.name, **data, "seconds": round(outcome.seconds, 3)}


__all__ = ["cap_workers", "check_job", "outcome_dict", "parse_jobs", "run_all"]
