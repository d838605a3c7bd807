"""How a Report shows itself (str, Jupyter, report.plot() and report.show()): the views the
package root installs into gradcheck.report (report.install_views), each delegating to a
renderer."""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import Iterator, Sequence
from html import escape
from typing import Any

from gradcheck.report import Report

NO_BLOCKS = ("this report kept no Jacobian blocks to draw: check with"
             " gradcheck.check(..., keep_blocks=True), then call report.plot()")


# The width of the terminal a process's parent runs in (pytest's, for its pytest-xdist
# workers, which have none).
INHERITED_WIDTH = "GRADCHECK_COLUMNS"


def _terminal_width() -> int | None:
    """$COLUMNS, else the width of the terminal stdout is on, if any."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= MIN_WIDTH:
        return int(columns)
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return None


def text_width() -> int:
    """The terminal's width; off a terminal (a log, a notebook) that of the terminal the
    parent process runs in (pytest's for a pytest-xdist worker), else the command line's 160
    columns."""
    width = _terminal_width()
    inherited = os.environ.get(INHERITED_WIDTH, "")
    if width is None and inherited.isdigit():
        width = int(inherited)
    return max(MIN_WIDTH, width or 160)


def share_terminal_width() -> None:
    """Tell the processes this one starts the width of its terminal, when it has one."""
    width = _terminal_width()
    if width is not None:
        os.environ.setdefault(INHERITED_WIDTH, str(width))


MIN_WIDTH = 40


def text(report: Report) -> str:
    from gradcheck.render.text import render_text

    return render_text(report, width=text_width()).rstrip("\n")


def html(report: Report) -> str:
    from gradcheck.render.html import render_html

    return render_html(report)


class Pictures(Sequence[Any]):
    """The block pictures of a report (gradcheck.render.plot.Picture); Jupyter shows them inline,
    each with its title, and each one's `png` holds the bytes."""

    def __init__(self, pictures: Sequence[Any]) -> None:
        self._pictures = tuple(pictures)

    def __len__(self) -> int:
        return len(self._pictures)

    def __getitem__(self, index: Any) -> Any:
        return self._pictures[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._pictures)

    def __repr__(self) -> str:
        return f"<{len(self)} gradcheck pictures: {', '.join(p.stem for p in self)}>"

    def _repr_html_(self) -> str:
        return "".join(_figure(picture) for picture in self._pictures)

    def _ipython_display_(self) -> None:
        """In Jupyter, one output per picture: its image/png, and beside it the picture with
        its caption as HTML (which a notebook shows; viewers that take only images, the PNG)."""
        from IPython.display import display

        for picture in self._pictures:
            display({"image/png": base64.b64encode(picture.png).decode("ascii"),
                     "text/html": _figure(picture), "text/plain": f"{picture.stem}.png"},
                    raw=True)


def _figure(picture: Any) -> str:
    """A picture, inline, with its file name as the caption."""
    data = base64.b64encode(picture.png).decode("ascii")
    return (f'<figure style="margin:4px 0"><img alt="{escape(picture.stem)}"'
            f' src="data:image/png;base64,{data}" style="max-width:100%">'
            f"<figcaption>{escape(picture.stem)}.png</figcaption></figure>")


def plot(report: Report) -> Pictures:
    """One picture per kept block (and per cut path), as `--plot DIR` draws them."""
    from gradcheck.render.plot import render_pictures

    pictures = render_pictures(report)
    if not pictures:
        raise ValueError(NO_BLOCKS)
    return Pictures(pictures)


def _ipython_display() -> Any:
    """IPython's display() inside a kernel (Jupyter, VS Code), else None."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return None
    shell = get_ipython()
    return display if shell is not None and getattr(shell, "kernel", None) is not None else None


def show(report: Report) -> None:
    """Display the table, and the pictures when blocks were kept, in a notebook; print the
    table elsewhere."""
    display = _ipython_display()
    if display is None:
        print(text(report))
        return
    display(report)
    if report.blocks:
        display(plot(report))
