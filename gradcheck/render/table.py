"""The rich table: one row per check, worst first, then a one-line summary."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from gradcheck.evidence import Location
from gradcheck.kinds.jacobian.evidence import JacobianEvidence
from gradcheck.report import CheckResult, Kind, Report
from gradcheck.spelling import format_index

STATUS_STYLE = {"pass": "green", "fail": "bold red", "error": "bold magenta", "warn": "yellow",
                "skip": "dim"}
STATUS_LABEL = {"pass": "PASS", "fail": "FAIL", "error": "ERROR", "warn": "WARN", "skip": "SKIP"}


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.2e}"


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2g}"


def status_text(status: str) -> Text:
    return Text(STATUS_LABEL[status], style=STATUS_STYLE[status])


def summary_line(report: Report) -> Text:
    verdict = "OK" if report.ok else "FAILED"
    counts = ", ".join(
        f"{report.count(status)} {word}"
        for status, word in (("fail", "failed"), ("error", "errors"), ("warn", "warnings"),
                             ("pass", "passed"), ("skip", "skipped"))
        if report.count(status)
    )
    line = Text()
    line.append(f"{verdict} ", style="bold green" if report.ok else "bold red")
    line.append(f"{report.target}: {counts or 'no checks'}")
    return line


COLUMNS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("status", {"no_wrap": True, "min_width": 6}), ("check", {"no_wrap": True}),
    ("input", {"no_wrap": True}), ("output", {"no_wrap": True}),
    ("max abs", {"justify": "right", "no_wrap": True, "min_width": 8}),
    ("max rel", {"justify": "right", "no_wrap": True, "min_width": 8}),
    ("err/allowed", {"justify": "right", "no_wrap": True}),
    ("worst", {"no_wrap": True}), ("location", {"no_wrap": True}),
    ("message", {"no_wrap": True, "overflow": "ellipsis", "min_width": 20}),
)
MESSAGE_COLUMN = len(COLUMNS) - 1
# Left out in this order when the table would not fit (an 80-column terminal), so that the
# location stays whole: worst, max rel, max abs, err/allowed (the findings below give them).
NARROW_DROPS = (7, 5, 4, 6)
# Below this width locations are shown as file:line.
ROOMY_WIDTH = 150
# A location longer than this is shown as file:line at any width (a library's file under
# site-packages would push the numbers and the message out of the table).
LONGEST_LOCATION = 48
MIN_MESSAGE_WIDTH = 30


def _pair(result: CheckResult) -> str:
    return " -> ".join(p for p in (result.input, result.output) if p)


def check_headline(result: CheckResult) -> str:
    """A check in one line: its kind, (input -> output), location and headline."""
    pair = f" ({_pair(result)})" if _pair(result) else ""
    where = f" at {result.location}" if result.location else ""
    return f"{result.check}{pair}{where}: {result.headline}"


def _short_location(location: Location) -> str:
    """file:line, without the file's directories."""
    if location.line is None:
        return str(location)
    return str(dataclasses.replace(location,
                                   path=location.path.replace("\\", "/").rsplit("/", 1)[-1]))


def _kept_columns(report: Report, max_width: int) -> tuple[list[int], int]:
    """The columns the table keeps at this width, and the width left for the message."""
    roomy = max_width >= ROOMY_WIDTH
    rows = [_row(result, roomy) for result in report.sorted_checks()]
    keep = [i for i in range(len(COLUMNS))
            if i in (0, 1) or (i != MESSAGE_COLUMN and any(str(r[i]) for r in rows))]

    def width(columns: list[int]) -> int:  # each column costs its widest text + 3
        return 1 + sum(3 + max(len(COLUMNS[i][0]), *(len(str(r[i])) for r in rows))
                       for i in columns)

    for dropped in NARROW_DROPS:
        if width(keep) <= max_width:
            break
        keep = [i for i in keep if i != dropped]
    # The message takes whatever the other columns leave, and is left out when that is too
    # little: the findings below then carry every message, a skip's reason included.
    left = max_width - width(keep) - 3
    if left >= MIN_MESSAGE_WIDTH:
        keep.append(MESSAGE_COLUMN)
    return keep, max(20, left)


class ChecksTable:
    """One line per check, laid out for the width it is drawn at."""

    def __init__(self, report: Report) -> None:
        self.report = report

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        keep, message_width = _kept_columns(self.report, options.max_width)
        rows = [_row(result, options.max_width >= ROOMY_WIDTH)
                for result in self.report.sorted_checks()]
        table = Table(show_header=True, header_style="bold", expand=False, pad_edge=False)
        for i in keep:
            name, column_options = COLUMNS[i]
            if i == MESSAGE_COLUMN:
                column_options = {**column_options, "max_width": message_width}
            table.add_column(name, **column_options)
        for row in rows:
            table.add_row(*(row[i] for i in keep))
        yield table


def checks_table(report: Report) -> ChecksTable:
    return ChecksTable(report)


def _row(result: CheckResult, roomy: bool) -> list[Any]:
    # Text, not markup: messages hold brackets such as y['mean'] or [0, 1].
    location = result.location
    return [
        status_text(result.status), result.check, Text(result.input or ""),
        Text(result.output or ""), _number(result.max_abs_err), _number(result.max_rel_err),
        _ratio(result.excess), format_index(result.worst_index, ","),
        Text("" if location is None else str(location)
             if roomy and len(str(location)) <= LONGEST_LOCATION else _short_location(location)),
        Text(result.headline),
    ]


class Findings:
    """Every check that did not pass, with its whole message (cause and fix), wrapped; a
    skipped check's only when the table is too narrow to show its reason whole."""

    def __init__(self, report: Report) -> None:
        self.report = report

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        keep, message_width = _kept_columns(self.report, options.max_width)

        def in_the_table(result: CheckResult) -> bool:  # a skip's whole reason, unclipped
            return (MESSAGE_COLUMN in keep and result.headline == result.message
                    and cell_len(result.message) <= message_width)

        shown = [r for r in self.report.sorted_checks()
                 if r.status != "pass" and not (r.status == "skip" and in_the_table(r))]
        for number, result in enumerate(shown, start=1):
            title = Text(f"{number}. ")
            title.append_text(status_text(result.status))
            pair = _pair(result)
            title.append(f" {result.check}" + (f" ({pair})" if pair else ""), style="bold")
            if result.location:
                title.append(f"  {result.location}", style="cyan")
            yield title
            yield Padding(Text(result.message), (0, 0, 0, 3), expand=False)


def findings(report: Report) -> Findings:
    return Findings(report)


def _matrix_text(values: Any, columns: int) -> str:
    """A block of shape output + input as a matrix: one row per output element."""
    array = np.asarray(values, dtype=np.float64).reshape(-1, max(columns, 1))
    return "\n".join(" ".join(f"{v:>11.6g}" for v in row) for row in array)


def _input_size(report: Report, name: str | None, shape: Sequence[int]) -> int:
    """How many elements the block's input has (its last axes), from the report's inputs."""
    info = next((i for i in report.inputs if i.name == name), None)
    if info is not None and tuple(shape[len(shape) - len(info.shape):]) == tuple(info.shape):
        return math.prod(info.shape)
    return math.prod(shape[1:]) if len(shape) > 1 else math.prod(shape)


MATRIX_KINDS = {Kind.JACOBIAN: "autodiff (tape.jacobian)",
                Kind.HESSIAN: "autodiff (nested tapes)"}


def jacobian_matrices(report: Report) -> list[RenderableType]:
    """Autodiff next to finite differences for each small block; large blocks are summarised."""
    shown: list[RenderableType] = []
    for result in report.checks:
        judged = result.evidence and result.evidence.underlying()
        if result.check not in MATRIX_KINDS or not isinstance(judged, JacobianEvidence):
            continue
        of = result.output if result.check == Kind.JACOBIAN else f"({result.output})"
        title = f"d{of}/d{result.input}  shape {tuple(judged.shape)}"
        autodiff, fd = judged.autodiff, judged.finite_difference
        if autodiff is None or fd is None:
            shown.append(Text(f"{title}: too large to show; max abs err"
                              f" {_number(result.max_abs_err)}", style="dim"))
            continue
        grid = Table(title=title, title_justify="left", show_edge=False, box=None)
        grid.add_column(MATRIX_KINDS[result.check])
        grid.add_column("finite differences")
        columns = _input_size(report, result.input, judged.shape)
        grid.add_row(_matrix_text(autodiff, columns), _matrix_text(fd, columns))
        shown.append(grid)
    return shown


def render_table(report: Report, *, show_matrices: bool = False,
                 quiet: bool = False) -> RenderableType:
    if quiet:
        return summary_line(report)
    parts: list[RenderableType] = [checks_table(report), findings(report)]
    if show_matrices:
        parts += jacobian_matrices(report)
    parts += [Text(f"note: {note}", style="dim") for note in report.notes]
    parts.append(summary_line(report))
    return Group(*parts)
