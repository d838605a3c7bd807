"""`gradcheck run`: every configured check, each isolated, each module loaded once."""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gradcheck.config import CheckConfig
from gradcheck.errors import GradcheckError
from gradcheck.exit_codes import ExitCode
from gradcheck.report import STATUS_RANK, Report


@dataclass(frozen=True)
class CheckOutcome:
    """One configured check: its report, or the error that stopped it."""

    name: str
    target: str
    report: Report | None
    exit_code: ExitCode
    seconds: float = 0.0
    error: str | None = None
    user_traceback: str | None = None

    @property
    def status(self) -> str:
        """pass, warn, fail or error (an error: no report, exit code 2 or 3)."""
        if self.report is None:
            return "error"
        if not self.report.ok:
            return "fail"
        return "warn" if self.report.count("warn") else "pass"


@dataclass(frozen=True)
class RunResult:
    outcomes: tuple[CheckOutcome, ...]

    @property
    def exit_code(self) -> ExitCode:
        """The highest code of any check: 3 beats 2 beats 1 beats 0."""
        return max((o.exit_code for o in self.outcomes), default=ExitCode.OK)

    @property
    def ok(self) -> bool:
        return self.exit_code == ExitCode.OK

    def sorted_outcomes(self) -> tuple[CheckOutcome, ...]:
        """Worst first (error, fail, warn, pass), keeping the configured order among equals."""
        return tuple(sorted(self.outcomes, key=lambda o: STATUS_RANK[o.status]))

    def count(self, status: str) -> int:
        return sum(1 for outcome in self.outcomes if outcome.status == status)


def _unexpected(name: str, exc: Exception) -> tuple[str, str]:
    from gradcheck.autodiff import first_line
    from gradcheck.locations import exception_location

    where = exception_location(exc)
    text = "".join(traceback.format_exception(exc))
    if where is not None:
        return f"{name} raised {first_line(exc)} (at {where})", text
    return f"internal error while checking {name}: {first_line(exc)}; please report it", text


def run_one(check: CheckConfig, timeout: float | None = None) -> CheckOutcome:
    """Load, check and time one configured check; never raises for the check's own problems.

    `timeout` applies when the check has no `timeout` key of its own.
    """
    from gradcheck.checks import COMMAND_KINDS, CheckOptions
    from gradcheck.pipeline import TargetRequest, check_request
    from gradcheck.timeout import run_with_time_limit

    request = TargetRequest(
        target=check.load_target, path=check.path, input_specs=check.input,
        shapes=check.shape, inputs_attr=check.inputs, upstream_specs=check.upstream,
    )
    options = CheckOptions(
        atol=check.atol, rtol=check.rtol, eps=check.eps, mode=check.mode, probes=check.probes,
        seed=check.seed, dtype=check.dtype, kinds=COMMAND_KINDS[check.command],
        surrogates=frozenset(check.surrogate),
    )
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
    from gradcheck.instrument import observing_custom_gradients
    from gradcheck.target import module_cache
    from gradcheck.tf_runtime import tensorflow

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
