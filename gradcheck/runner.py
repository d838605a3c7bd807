"""`gradcheck run`: every configured check, each isolated, each module loaded once."""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from gradcheck.errors import ExitCode, GradcheckError
from gradcheck.load.config import CheckConfig
from gradcheck.report import CheckOutcome, RunResult


def _unexpected(name: str, exc: Exception) -> tuple[str, str]:
    from gradcheck.load.locations import exception_location
    from gradcheck.tf.program import first_line

    where = exception_location(exc)
    text = "".join(traceback.format_exception(exc))
    if where is not None:
        return f"{name} raised {first_line(exc)} (at {where})", text
    return f"internal error while checking {name}: {first_line(exc)}; please report it", text


def run_one(check: CheckConfig, timeout: float | None = None) -> CheckOutcome:
    """Load, check and time one configured check; never raises for the check's own problems.

    `timeout` applies when the check has no `timeout` key of its own.
    """
    from gradcheck.load.timeout import run_with_time_limit
    from gradcheck.options import options_from
    from gradcheck.pipeline import TargetRequest, check_request

    request = TargetRequest(
        target=check.load_target, path=check.path, input_specs=check.input,
        shapes=check.shape, inputs_attr=check.inputs, upstream_specs=check.upstream,
    )
    options = options_from(check.command, dataclasses.asdict(check))
    function = check.target.rpartition(":")[2]
    start = time.perf_counter()
    try:
        report = run_with_time_limit(lambda: check_request(request, options),
                                     check.timeout if check.timeout is not None else timeout,
                                     function, flag="timeout")
    except GradcheckError as error:
        return CheckOutcome(check.name, check.target, None, error.exit_code,
                            time.perf_counter() - start, error.message, error.user_traceback)
    except Exception as exc:  # isolate the unforeseen: the other checks still run
        message, text = _unexpected(function, exc)
        return CheckOutcome(check.name, check.target, None, ExitCode.FUNCTION_ERROR,
                            time.perf_counter() - start, message, text)
    report = dataclasses.replace(report, target=check.target)
    return CheckOutcome(check.name, check.target, report, report.exit_code,
                        time.perf_counter() - start)


def run_all(checks: Sequence[CheckConfig], timeout: float | None = None,
            progress: Callable[[CheckConfig, CheckOutcome | None], Any] | None = None) -> RunResult:
    """Run every check in order; `progress(check, None)` before and `(check, outcome)` after."""
    from gradcheck.load.target import module_cache
    from gradcheck.tf.instrument import observing_custom_gradients
    from gradcheck.tf.runtime import tensorflow

    tensorflow()  # imported before any time limit starts: its start-up is nobody's fault
    outcomes = []
    # Modules load once per run, so custom gradients are observed across all the checks.
    with module_cache(), observing_custom_gradients():
        for check in checks:
            if progress is not None:
                progress(check, None)
            outcome = run_one(check, timeout)
            outcomes.append(outcome)
            if progress is not None:
                progress(check, outcome)
    return RunResult(tuple(outcomes))


def outcome_dict(outcome: CheckOutcome) -> dict[str, Any]:
    """The single-target JSON report (or error object), with the check's name and time."""
    from gradcheck.render.json_format import error_dict, report_dict

    if outcome.report is not None:
        data = report_dict(outcome.report)
    else:
        data = error_dict(outcome.error or "error", int(outcome.exit_code), outcome.target)
    return {"name": outcome.name, **data, "seconds": round(outcome.seconds, 3)}
