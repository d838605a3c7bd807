"""The report: frozen dataclasses shared by the core, the API and the renderers."""

from __future__ import annotations

import dataclasses
from typing import Any

from gradcheck.exit_codes import ExitCode

VERSION = "0.1.0"

STATUSES = ("pass", "fail", "warn", "skip", "error")
FAILING_STATUSES = frozenset({"fail", "error"})
# Worst first: used to sort rows and to pick a summary status.
STATUS_RANK = {"error": 0, "fail": 1, "warn": 2, "skip": 3, "pass": 4}


@dataclasses.dataclass(frozen=True)
class CheckResult:
    check: str
    status: str
    message: str
    input: str | None = None
    output: str | None = None
    location: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    worst_index: tuple[int, ...] | None = None
    # The largest error / allowed ratio: the number that decided the verdict (> 1 fails).
    excess: float | None = None
    details: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    @property
    def failed(self) -> bool:
        return self.status in FAILING_STATUSES


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str
    differentiable: bool = True


@dataclasses.dataclass(frozen=True)
class Report:
    target: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    checks: tuple[CheckResult, ...]
    notes: tuple[str, ...] = ()
    explain: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return not any(result.failed for result in self.checks)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.ok else ExitCode.CHECK_FAILED

    def sorted_checks(self) -> tuple[CheckResult, ...]:
        """Checks worst status first, keeping the original order among equals."""
        return tuple(sorted(self.checks, key=lambda result: STATUS_RANK[result.status]))

    def count(self, status: str) -> int:
        return sum(1 for result in self.checks if result.status == status)
