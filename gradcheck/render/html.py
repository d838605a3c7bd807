"""The report as an HTML table (Jupyter's rich display): one row per check, worst first,
failing rows highlighted, then every finding in full, the small blocks as matrices, notes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

import numpy as np

from gradcheck.kinds.jacobian.evidence import JacobianEvidence
from gradcheck.render.table import MATRIX_KINDS, STATUS_LABEL, summary_line
from gradcheck.report import CheckResult, Kind, Report
from gradcheck.spelling import format_index

# Inline styles only: notebook viewers (GitHub, nbviewer, VS Code) drop <style> elements.
ROW_BACKGROUND = {"fail": "#fde2e1", "error": "#f6def6", "warn": "#fff5d6", "pass": "",
                  "skip": ""}
STATUS_COLOUR = {"fail": "#b3261e", "error": "#8e24aa", "warn": "#8a6100", "pass": "#1e7b34",
                 "skip": "#777777"}
CELL = "padding:2px 8px;text-align:left;border-bottom:1px solid #ddd;vertical-align:top"
NUMBER = CELL.replace("text-align:left", "text-align:right") + ";font-variant-numeric:tabular-nums"
BAD_CELL = "background:#f4a09a;font-weight:bold"
WORST_CELL = "background:#d93025;color:white;font-weight:bold"
# (header, attribute or function, numeric)
COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("status", "status", False), ("check", "check", False), ("input", "input", False),
    ("output", "output", False), ("max abs", "max_abs_err", True),
    ("max rel", "max_rel_err", True), ("err/allowed", "excess", True),
    ("worst", "worst_index", False), ("location", "location", False),
    ("message", "message", False),
)


def _cell_text(result: CheckResult, field: str) -> str:
    value = getattr(result, field)
    if value is None:
        return ""
    if field in ("max_abs_err", "max_rel_err"):
        return f"{value:.2e}"
    if field == "excess":
        return f"{value:.2g}"
    if field == "worst_index":
        return format_index(value, ",")
    if field == "message":
        return result.headline
    if field == "status":
        return STATUS_LABEL[value]
    return str(value)


def _status(status: str) -> str:
    return (f'<span style="color:{STATUS_COLOUR[status]};font-weight:bold">'
            f"{STATUS_LABEL[status]}</span>")


def checks_table(report: Report) -> str:
    """One row per check, worst first; columns that are empty for every check are left out."""
    rows = report.sorted_checks()
    keep = [c for c in COLUMNS
            if c[1] in ("status", "check") or any(_cell_text(r, c[1]) for r in rows)]
    head = "".join(f'<th style="{NUMBER if numeric else CELL}">{escape(name)}</th>'
                   for name, _, numeric in keep)
    body = []
    for result in rows:
        background = ROW_BACKGROUND[result.status]
        row_style = f' style="background:{background}"' if background else ""
        cells = []
        for _, field, numeric in keep:
            text = _status(result.status) if field == "status" else escape(
                _cell_text(result, field))
            if field == "location" and text:
                text = f"<code>{text}</code>"
            style = NUMBER if numeric else CELL
            if field != "message":
                style += ";white-space:nowrap"
            cells.append(f'<td style="{style}">{text}</td>')
        body.append(f"<tr{row_style}>{''.join(cells)}</tr>")
    return (f'<table style="border-collapse:collapse;margin:4px 0">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")


def findings(report: Report) -> str:
    """Every check that did not pass, with its whole message (cause and fix)."""
    items = []
    for result in report.sorted_checks():
        if result.status in ("pass", "skip"):
            continue
        pair = " -&gt; ".join(escape(p) for p in (result.input, result.output) if p)
        title = f"{_status(result.status)} <b>{escape(str(result.check))}</b>"
        title += f" ({pair})" if pair else ""
        if result.location:
            title += f" <code>{escape(str(result.location))}</code>"
        items.append(f'<li style="margin-bottom:4px">{title}<br>{escape(result.message)}</li>')
    return f'<ol style="margin:4px 0">{"".join(items)}</ol>' if items else ""


def _matrix(values: Any) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim < 2:
        return array.reshape(1, -1) if array.ndim == 1 else array.reshape(1, 1)
    return array.reshape(array.shape[0], -1)


def _failing_cells(result: CheckResult, autodiff: np.ndarray,
                   reference: np.ndarray) -> np.ndarray:
    """Elements beyond the tolerance even with the block's largest error estimate (so a marked
    cell surely fails; the verdict itself is elementwise)."""
    judged = result.evidence and result.evidence.underlying()
    if result.status != "fail" or not isinstance(judged, JacobianEvidence):
        return np.zeros(autodiff.shape, dtype=bool)
    allowed = judged.atol + judged.rtol * np.abs(reference) + 4.0 * judged.fd_error_estimate
    with np.errstate(invalid="ignore"):
        return np.asarray(~(np.abs(autodiff - reference) <= allowed))


def _grid(matrix: np.ndarray, bad: np.ndarray, worst: tuple[int, int] | None) -> str:
    rows = []
    for r, row in enumerate(matrix):
        cells = []
        for c, value in enumerate(row):
            style = NUMBER.replace(";border-bottom:1px solid #ddd", "")
            if worst == (r, c):
                style += ";" + WORST_CELL
            elif bad[r, c]:
                style += ";" + BAD_CELL
            cells.append(f'<td style="{style}">{value + 0.0:.6g}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f'<table style="border-collapse:collapse">{"".join(rows)}</table>'


def _worst_cell(result: CheckResult, judged: JacobianEvidence,
                shape: tuple[int, int]) -> tuple[int, int] | None:
    index = result.worst_index
    if result.status != "fail" or index is None or not index:
        return None
    flat = int(np.ravel_multi_index(index, judged.shape))
    r, c = divmod(flat, shape[1])
    return (r, c) if r < shape[0] else None


def matrices(report: Report) -> str:
    """Autodiff next to finite differences for each small block, failing elements marked."""
    shown = []
    for result in report.checks:
        judged = result.evidence and result.evidence.underlying()
        if result.check not in MATRIX_KINDS or not isinstance(judged, JacobianEvidence) \
                or judged.autodiff is None or judged.finite_difference is None:
            continue
        autodiff, reference = _matrix(judged.autodiff), _matrix(judged.finite_difference)
        bad = _failing_cells(result, autodiff, reference)
        worst = _worst_cell(result, judged, (autodiff.shape[0], autodiff.shape[1]))
        of = result.output if result.check == Kind.JACOBIAN else f"({result.output})"
        title = escape(f"d{of}/d{result.input}  shape {tuple(judged.shape)}")
        pair = _side_by_side(MATRIX_KINDS[result.check], autodiff, reference, bad, worst)
        shown.append('<div style="display:inline-block;max-width:100%;margin:4px 16px 4px 0;'
                     f'vertical-align:top"><b>{title}</b>{pair}</div>')
    return "".join(shown)


def _side_by_side(label: str, autodiff: np.ndarray, reference: np.ndarray, bad: np.ndarray,
                  worst: tuple[int, int] | None) -> str:
    """The two matrices next to each other while the cell is wide enough, one below the other
    when not; a matrix wider than the cell scrolls inside it."""
    panes = "".join(f'<div style="margin:0 8px 4px 0;max-width:100%;overflow-x:auto">'
                    f'<div style="{CELL};font-weight:bold">{escape(title)}</div>'
                    f"{_grid(matrix, bad, worst)}</div>"
                    for title, matrix in ((label, autodiff), ("finite differences", reference)))
    return f'<div style="display:flex;flex-wrap:wrap;align-items:flex-start">{panes}</div>'


def _paragraphs(lines: Iterable[str], style: str) -> str:
    return "".join(f'<div style="{style}">{escape(line)}</div>' for line in lines)


def render_html(report: Report, *, show_matrices: bool = True) -> str:
    """The whole report as one HTML fragment (inline styles, no scripts)."""
    summary = summary_line(report).plain
    verdict, _, rest = summary.partition(" ")
    colour = STATUS_COLOUR["pass" if report.ok else "fail"]
    parts: Sequence[str] = (
        checks_table(report), findings(report), matrices(report) if show_matrices else "",
        _paragraphs((f"note: {note}" for note in report.notes), "color:#666"),
        f'<div><b style="color:{colour}">{escape(verdict)}</b> {escape(rest)}</div>',
    )
    return f'<div class="gradcheck-report">{"".join(parts)}</div>'
