"""How a Report shows itself (str, Jupyter, report.plot() and report.show()): the views the
package root installs into gradcheck.report (report.install_views), each delegating to a
renderer."""

from __future__ import annotations

import base64
from collections.abc import Iterator, Sequence
from html import escape
from typing import Any

from gradcheck.report import Report

NO_BLOCKS = ("this report kept no Jacobian blocks to draw: check with"
             " gradcheck.check(..., keep_blocks=True), then call report.plot()")


def text_width() -> int:
    """The terminal's width ($COLUMNS, else the terminal's that stdout is on); off a terminal
    (a log, a notebook, a pytest-xdist worker) the command line's 160 columns."""
    import shutil

    return max(40, shutil.get_terminal_size((160, 24)).columns)


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
