"""Progress on stderr for the CLI: a check's long work (shown only once it has taken over a
second) and `gradcheck run`'s checks done and running."""

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


class RunProgress:
    """`gradcheck run`'s transient bar: checks done out of all, and the checks running now.
    Called as progress(check, None) when a check starts and (check, outcome) when it ends."""

    def __init__(self, console: Any, total: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.bar = Progress(TextColumn("gradcheck run"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.description}"), console=console, transient=True)
        self.task = self.bar.add_task("", total=total)
        self.running: list[str] = []

    def __call__(self, check: Any, outcome: Any) -> None:
        if outcome is None:
            self.running.append(check.name)
        else:
            if check.name in self.running:
                self.running.remove(check.name)
            self.bar.advance(self.task)
        self.bar.update(self.task, description="running " + ", ".join(self.running)
                        if self.running else "")

    def __enter__(self) -> RunProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()
