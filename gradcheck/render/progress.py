"""A rich progress bar on stderr for the CLI, shown only once work has taken over a second."""

from __future__ import annotations

import time
from typing import Any

# Work that finishes sooner than this never shows a bar.
DELAY_SECONDS = 1.0


class DelayedProgress:
    """A progress callback (task, done, total) that draws nothing until DELAY_SECONDS passed."""

    def __init__(self, console: Any, delay: float = DELAY_SECONDS) -> None:
        self.console = console
        self.delay = delay
        self.started = time.monotonic()
        self.bar: Any = None
        self.tasks: dict[str, Any] = {}

    def __call__(self, task: str, done: int, total: int) -> None:
        if self.bar is None:
            if time.monotonic() - self.started < self.delay:
                return
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                                console=self.console, transient=True)
            self.bar.start()
        if task not in self.tasks:
            self.tasks[task] = self.bar.add_task(task, total=total)
        self.bar.update(self.tasks[task], completed=done, total=total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def __enter__(self) -> DelayedProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
