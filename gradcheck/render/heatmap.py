"""Terminal heatmaps of |AD − FD| / allowed for blocks too large to print as matrices (up to
60 x 120 elements): one character per element, coloured, or plain characters without colour."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from rich.console import Group, RenderableType
from rich.text import Text

from gradcheck.kinds.jacobian.evidence import JacobianEvidence
from gradcheck.render.blocks import BlockView, block_views
from gradcheck.report import Kind, Report

MAX_ROWS, MAX_COLUMNS = 60, 120
# Blocks up to this many elements are printed as matrices (the report's details carry them).
MATRIX_LIMIT = 64
# (upper bound of the excess, character without colour, style with colour), in order.
LEVELS: tuple[tuple[float, str, str], ...] = (
    (0.1, ".", "grey35"),
    (1.0, ":", "grey70"),
    (10.0, "+", "yellow"),
    (1e3, "x", "dark_orange"),
    (math.inf, "#", "bold red"),
)
NOT_FINITE = ("!", "bold magenta")
KINK = ("?", "blue")
CELL = "█"


def _shown_as_matrix(report: Report, view: BlockView) -> bool:
    for result in report.checks:
        if (result.check == Kind.JACOBIAN and result.output == view.output
                and result.input == view.input and result.evidence is not None
                and isinstance(judged := result.evidence.underlying(), JacobianEvidence)):
            return judged.autodiff is not None
    return view.finite_difference.size <= MATRIX_LIMIT


def fits(view: BlockView) -> bool:
    rows, columns = view.shape
    return rows <= MAX_ROWS and columns <= MAX_COLUMNS


def _cell(excess: float) -> tuple[str, str]:
    if math.isnan(excess):
        return KINK
    if math.isinf(excess):
        return NOT_FINITE
    for bound, character, style in LEVELS:
        if excess <= bound:
            return character, style
    return LEVELS[-1][1:]


def _header(columns: int, margin: int) -> list[str]:
    """Column indices written downwards: tens on one line (when needed), ones on the next."""
    lines = []
    if columns > 10:
        lines.append(" " * margin + "".join(str(j // 10 % 10) if j % 10 == 0 else " "
                                            for j in range(columns)))
        if columns > 100:
            lines.insert(0, " " * margin + "".join(str(j // 100) if j % 100 == 0 else " "
                                                    for j in range(columns)))
    lines.append(" " * margin + "".join(str(j % 10) for j in range(columns)))
    return [line.rstrip() for line in lines]


def _title(view: BlockView) -> str:
    rows, columns = view.shape
    measure = ("|AD − FD| / allowed" if view.measure == "allowed"
               else "|AD − FD| relative to the block's largest |FD|")
    title = (f"d{view.output}/d{view.input} {measure}, {rows}×{columns}"
             f" (rows: {view.output} {tuple(view.output_shape)},"
             f" columns: {view.input} {tuple(view.input_shape)}, row-major)")
    failing = int(view.failing.sum())
    worst = view.worst
    if failing and worst is not None:
        r, c = worst
        title += f": {failing} failing, worst [{r}, {c}]"
        if view.measure == "allowed":
            value = view.excess[r, c]
            title += f" at {value:.2g}×" if np.isfinite(value) else " (not finite)"
    else:
        title += ": all within tolerance"
    return title


def _legend(color: bool) -> Text:
    legend = Text("  ")
    previous = "0"
    for bound, character, style in LEVELS:
        label = f"≤{bound:g}" if math.isfinite(bound) else f">{previous}"
        legend.append(CELL if color else character, style=style if color else "")
        legend.append(f" {label}  ")
        previous = f"{bound:g}"
    for (character, style), label in ((KINK, "kink"), (NOT_FINITE, "not finite")):
        legend.append(CELL if color else character, style=style if color else "")
        legend.append(f" {label}  ")
    legend.rstrip()
    return legend


def heatmap_text(view: BlockView, color: bool) -> Text:
    """One block's heatmap: a title, column indices, one line per output element."""
    rows, columns = view.shape
    margin = len(str(rows - 1)) + 1
    text = Text()
    text.append(_title(view) + "\n", style="bold" if color else "")
    text.append("\n".join(_header(columns, margin)) + "\n", style="dim" if color else "")
    for r in range(rows):
        text.append(str(r).rjust(margin - 1) + " ", style="dim" if color else "")
        for c in range(columns):
            character, style = _cell(float(view.excess[r, c]))
            if color:
                text.append(CELL, style=style)
            else:
                text.append(character)
        text.append("\n")
    text.append_text(_legend(color))
    return text


def heatmap_views(report: Report, failing_only: bool = False) -> list[BlockView]:
    """The blocks that get a heatmap: kept, too large for matrices, small enough for one."""
    return [view for view in block_views(report)
            if fits(view) and not _shown_as_matrix(report, view)
            and (not failing_only or bool(view.failing.any()))]


def render_heatmaps(report: Report, color: bool, *, failing_only: bool = False) -> Any:
    """Every qualifying block's heatmap as a rich Group (empty when none qualifies); needs
    Report.blocks (CheckSettings(keep_blocks=True))."""
    parts: list[RenderableType] = [heatmap_text(view, color)
                                   for view in heatmap_views(report, failing_only)]
    return Group(*parts)
