"""The `gradcheck run` summary: one row per configured check, worst first, then a verdict line."""

from __future__ import annotations

import io

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.padding import Padding
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from gradcheck.render.table import render_table, status_text
from gradcheck.report import CheckOutcome, RunResult, Status


def _counts(outcome: CheckOutcome) -> str:
    if outcome.report is None:
        return f"exit code {int(outcome.exit_code)}"
    report = outcome.report
    return ", ".join(f"{report.count(s)} {s}" for s in ("fail", "error", "warn", "pass", "skip")
                     if report.count(s))


def _finding(outcome: CheckOutcome) -> tuple[str, str]:
    """The worst finding's message and location (or the error that stopped the check)."""
    if outcome.report is None:
        return outcome.error or "error", ""
    worst = outcome.report.sorted_checks()[0] if outcome.report.checks else None
    if worst is None or worst.status == Status.PASS:
        return "all checks pass", ""
    return f"{worst.check}: {worst.message}", str(worst.location or "")


# The finding column is shown when it gets at least this many columns; else each finding is
# told under the table, on its own lines.
MIN_FINDING_WIDTH = 30
FIXED = ("status", "check", "results", "location")


class RunSummary:
    """One row per configured check, worst first, laid out for the width it is drawn at: the
    names, counts, locations and times are never cut, the findings wrap at words."""

    def __init__(self, result: RunResult) -> None:
        self.result = result

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        outcomes = self.result.sorted_outcomes()
        findings = [_finding(o) for o in outcomes]
        # name, results, location, time: never cut; each costs its widest text and 3 (padding
        # and border), as the status does.
        fixed = [[o.name for o in outcomes], [_counts(o) for o in outcomes],
                 [location for _, location in findings],
                 [f"{o.seconds:.1f}s" for o in outcomes]]
        used = 1 + (3 + len("status")) + sum(
            3 + max(len(name), *map(len, cells))
            for name, cells in zip(("check", "results", "location", "time"), fixed))
        wide = options.max_width - used - 3 >= MIN_FINDING_WIDTH
        table = Table(title="gradcheck run", title_justify="left", header_style="bold",
                      pad_edge=False)
        for name in FIXED if wide else FIXED[:3]:
            table.add_column(name, no_wrap=True)
        if wide:
            table.add_column("finding", ratio=1)
        table.add_column("time", justify="right", no_wrap=True)
        for outcome, (message, location) in zip(outcomes, findings):
            shown = (location, Text(message)) if wide else ()
            table.add_row(status_text(outcome.status), outcome.name, _counts(outcome), *shown,
                          f"{outcome.seconds:.1f}s")
        yield table
        if wide:
            return
        for outcome, (message, location) in zip(outcomes, findings):
            if outcome.status != Status.PASS:
                yield Text.assemble((outcome.name, "bold"), (f" {location}", "cyan"))
                yield Padding(Text(message), (0, 0, 0, 3))


def summary_table(result: RunResult) -> RunSummary:
    return RunSummary(result)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def verdict_line(result: RunResult) -> Text:
    counts = ", ".join(
        _plural(result.count("error"), "error") if status == "error"
        else f"{result.count(status)} {word}"
        for status, word in (("error", ""), ("fail", "failed"), ("warn", "with warnings"),
                             ("pass", "passed")) if result.count(status))
    seconds = sum(o.seconds for o in result.outcomes)
    line = Text()
    line.append("OK " if result.ok else "FAILED ", style="bold green" if result.ok else "bold red")
    took = f"{seconds:.1f}s" if result.wall_seconds is None else (
        f"{result.wall_seconds:.1f}s, {seconds:.1f}s of it in the checks")
    line.append(f"{_plural(len(result.outcomes), 'check')}: {counts} in {took}"
                f" (exit code {int(result.exit_code)})")
    return line


def render_run(result: RunResult, *, quiet: bool = False,
               tracebacks: bool = False) -> RenderableType:
    """Details of every failing check, then the summary table and the verdict line."""
    if quiet:
        return verdict_line(result)
    parts: list[RenderableType] = []
    for outcome in result.outcomes:
        if outcome.status not in ("fail", "error"):
            continue
        parts.append(Rule(f"{outcome.name} ({outcome.target})", align="left"))
        if outcome.report is not None:
            parts.append(render_table(outcome.report))
            continue
        if tracebacks and outcome.user_traceback:
            parts.append(Text(outcome.user_traceback.rstrip()))
        parts.append(Text(f"Error: {outcome.error}", style="bold magenta"))
    parts += [summary_table(result), verdict_line(result)]
    return Group(*parts)


def render_run_text(result: RunResult, width: int = 160) -> str:
    """The same, as plain text (for -o FILE)."""
    buffer = io.StringIO()
    Console(file=buffer, width=width, no_color=True, color_system=None, force_terminal=False,
            highlight=False).print(render_run(result))
    return buffer.getvalue()
