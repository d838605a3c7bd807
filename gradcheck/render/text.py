"""The table as plain text (for assertion messages and files), with the explanation when the
report has one."""

from __future__ import annotations

import io

from rich.console import Console

from gradcheck.render.table import render_table
from gradcheck.report import Report


def render_text(report: Report, width: int = 160, show_matrices: bool = False) -> str:
    """The table (and the explanation) laid out for `width` columns, lines not padded."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, no_color=True, color_system=None,
                      force_terminal=False, force_jupyter=False, highlight=False)
    console.print(render_table(report, show_matrices=show_matrices))
    if report.explain is not None:
        from gradcheck.render.explain import render_explanation

        console.print()
        console.print(render_explanation(report.explain))
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())
