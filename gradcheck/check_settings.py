"""How one check goes, apart from what the user asked of the check (gradcheck.options): whether
it keeps the Jacobian blocks, whether it may vectorise, and whom it tells what it is doing."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gradcheck.errors import Phase


@dataclass(frozen=True)
class CheckSettings:
    """The check's plumbing, which travels beside the CheckOptions (a Job carries both) and is
    set by whoever runs the check, never by a check option.

    The callbacks belong to the process that made them: they are never pickled (a worker
    reports through its own channel, gradcheck.processes.worker), so a Job reaches a worker
    without them."""

    # Keep every Jacobian block's arrays in Report.blocks (for pictures and --save).
    keep_blocks: bool = False
    # False: never vectorise (pfor, vectorized_map), after TensorFlow crashed doing so.
    vectorise: bool = True
    # Called as progress(task, done, total) as work advances; the core never prints.
    progress: Callable[[str, int, int], None] | None = field(default=None, compare=False)
    # Called with what is about to run (the vectorised tape.jacobian of y with respect to x,
    # ...), so that a crash or a time-out in native code can be reported with its phase.
    phase: Callable[[Phase | str], None] | None = field(default=None, compare=False)
    # A folder for the run's temporary files (a worker's, which its parent removes however the
    # worker ends), or None for the system's temporary folder.
    scratch: str | None = field(default=None, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "progress": None, "phase": None}

    def __copy__(self) -> CheckSettings:
        return self  # frozen: a copy keeps its callbacks (only pickling leaves them behind)

    def __deepcopy__(self, memo: dict[int, Any]) -> CheckSettings:
        return self

    def reporting_to(self, phase: Callable[[Phase | str], None] | None,
                     progress: Callable[[str, int, int], None] | None) -> CheckSettings:
        """These settings, telling `phase` and `progress` as the run advances."""
        return dataclasses.replace(self, phase=phase, progress=progress)

    def without_vectorisation(self) -> CheckSettings:
        return dataclasses.replace(self, vectorise=False)

    def task_progress(self, task: str) -> Callable[[int, int], None] | None:
        """progress(done, total) of one task, or None when nobody listens."""
        report = self.progress
        if report is None:
            return None
        return lambda done, total: report(task, done, total)


# A run nobody watches: no blocks kept, vectorised, no callbacks (the Python API's default).
DEFAULT_RUN = CheckSettings()
