"""The explanation of tape.gradient (Report.explain) as rich tables, one per input."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from rich.columns import Columns
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.padding import Padding
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from gradcheck.evidence.explain import (
    Explanation,
    InputExplanation,
    Misconception,
    TargetExplanation,
    TensorView,
)
from gradcheck.render.explanation_words import (
    FORMULAS,
    coincide_text,
    misconception_text,
    several_text,
)


def _matrix_rows(values: Any, row_size: int | None) -> list[list[float]]:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 0:
        return [[float(array)]]
    if row_size is None:
        row_size = array.shape[-1]
    return array.reshape(-1, max(row_size, 1)).tolist()


def matrix_text(view: TensorView | None, row_size: int | None = None) -> str:
    """A tensor view as aligned rows (a Jacobian as |y| rows by |x| columns), or its summary."""
    if view is None:
        return "None"
    if view.values is None:
        summary = view.summary
        low, high, norm, nonzero = ((summary.min, summary.max, summary.norm, summary.nonzero)
                                    if summary is not None else (0.0, 0.0, 0.0, 0))
        return (f"shape {tuple(view.shape)}\nmin {low:.4g}, max {high:.4g}\nnorm {norm:.4g},"
                f" {nonzero} nonzero")
    rows = [[f"{v:.6g}" for v in row] for row in _matrix_rows(view.values, row_size)]
    width = max((len(cell) for row in rows for cell in row), default=1)
    return "\n".join(" ".join(cell.rjust(width) for cell in row) for row in rows)


def _jacobian_text(target: TargetExplanation, input_size: int) -> str:
    if target.jacobian is None:
        return "None (no path)"
    text = matrix_text(target.jacobian, input_size)
    if target.jacobian_source != "autodiff":
        text += f"\n(from {target.jacobian_source})"
    return text


def _misconception_text(misconception: Misconception | None) -> Text:
    if misconception is None:
        return Text("")
    if not misconception.compatible:
        return Text(misconception_text(misconception), style="yellow")
    text = Text(matrix_text(misconception.values))
    difference = misconception.max_abs_difference
    if difference is None:
        return text
    if difference == 0.0:
        text.append("\n= uᵀJ", style="green")
    else:
        text.append(f"\n≠ uᵀJ (off by up to {difference:.4g})", style="bold red")
    return text


def _with_error(text: str, error: str | None) -> str:
    return text if error is None else f"{text}\nraised {error}"


# The narrowest the side-by-side table lets its prose column be, and the stacked layout's
# indent.
PROSE_MIN_WIDTH = 24
INDENT = 2


def _headers(name: str) -> tuple[str, ...]:
    """The six columns' headers, each at most two short lines."""
    return ("target y", f"J = tape.jacobian(y, {name})\nrows: y, columns: {name}",
            "u (upstream)", f"tape.gradient(y, {name})\n= 1ᵀJ",
            f"tape.gradient(y, {name},\n  output_gradients=u) = uᵀJ",
            f"tape.gradient(y, {name}) * u\n(the misconception)")


def _rows(entry: InputExplanation) -> list[tuple[str | Text, list[str | Text], bool]]:
    """Per target (then over all targets): its name, its J, u, 1ᵀJ, uᵀJ and gradient * u, and
    whether that last one is prose (the product cannot be formed) rather than a matrix."""
    size = int(np.prod(entry.shape, dtype=np.int64))
    rows: list[tuple[str | Text, list[str | Text], bool]] = [
        (target.output,
         [_jacobian_text(target, size), matrix_text(target.upstream),
          _with_error(matrix_text(target.plain), target.error), matrix_text(target.vjp),
          _misconception_text(target.misconception)],
         _is_prose(target.misconception))
        for target in entry.targets]
    if entry.several_targets:
        rows.append((Text("all targets\n(one call)", style="bold"),
                     ["", "", _with_error(matrix_text(entry.plain), entry.error),
                      Text(matrix_text(entry.vjp), style="bold"),
                      _misconception_text(entry.misconception)],
                     _is_prose(entry.misconception)))
    return rows


def _is_prose(misconception: Misconception | None) -> bool:
    return misconception is not None and not misconception.compatible


def _widest(cell: str | Text) -> int:
    return max((len(line) for line in str(cell).splitlines()), default=0)


def _title(entry: InputExplanation) -> str:
    return f"{entry.input}, shape {tuple(entry.shape)}: what tape.gradient returns"


def input_table(entry: InputExplanation) -> Table:
    """Side by side, per target and summed: J, u, 1ᵀJ, uᵀJ and gradient * u. Only the prose of
    the last column wraps: a matrix row is never broken."""
    rows = _rows(entry)
    table = Table(title=_title(entry), title_justify="left", header_style="bold",
                  show_lines=True, pad_edge=False)
    headers = _headers(entry.input)
    for header in headers[:-1]:
        table.add_column(header, no_wrap=True)
    matrices = [cells[-1] for _, cells, prose in rows if not prose]
    table.add_column(headers[-1], min_width=max([PROSE_MIN_WIDTH, *map(_widest, matrices)]))
    for name, cells, _ in rows:
        table.add_row(name, *cells)
    return table


def _side_by_side_width(entry: InputExplanation) -> int:
    """The width input_table needs to show every matrix and header unbroken."""
    headers = _headers(entry.input)
    columns = list(zip(*[(name, *cells) for name, cells, _ in _rows(entry)]))
    widths = [max(_widest(header), *map(_widest, cells))
              for header, cells in zip(headers[:-1], columns[:-1])]
    last = [cell for cell, (_, _, prose) in zip(columns[-1], _rows(entry)) if not prose]
    widths.append(max([PROSE_MIN_WIDTH, _widest(headers[-1]), *map(_widest, last)]))
    # Each column is padded by one space on each side but the table's outer edges, and
    # bordered.
    return sum(widths) + 2 * len(widths) - 2 + len(widths) + 1


def _fitted(cell: str | Text, width: int) -> Text:
    """A matrix as it is, unwrapped; one whose rows are wider than `width` is not broken but
    said to be too wide."""
    if _widest(cell) > width:
        return Text(f"rows of {_widest(cell)} characters, too wide for {width} columns"
                    " (--format json has every value)", style="dim")
    text = cell.copy() if isinstance(cell, Text) else Text(cell)
    text.no_wrap, text.overflow = True, "ellipsis"
    return text


class InputTable:
    """One input's table laid out for the width it is drawn at: side by side when every block
    fits, else each target's blocks under each other (as many to a line as fit)."""

    def __init__(self, entry: InputExplanation) -> None:
        self.entry = entry

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if _side_by_side_width(self.entry) <= options.max_width:
            yield input_table(self.entry)
        else:
            yield from self._stacked(options.max_width)

    def _stacked(self, width: int) -> Iterator[RenderableType]:
        headers = _headers(self.entry.input)[1:]
        yield Text(_title(self.entry), style="italic")
        for name, cells, prose in _rows(self.entry):
            label = str(name).replace("\n", " ")
            yield Rule(Text(label if label.startswith("all targets") else f"target {label}",
                            style="bold"), align="left")
            blocks = [Group(Text(header, style="bold"), _fitted(cell, width - INDENT), Text(""))
                      for index, (header, cell) in enumerate(zip(headers, cells))
                      if str(cell) and not (prose and index == len(cells) - 1)]
            yield Padding(Columns(blocks, padding=(0, 4)), (0, 0, 0, INDENT))
            if prose:
                said = Text(headers[-1].replace("\n", " ") + ": ", style="bold")
                said.append_text(Text(cells[-1]) if isinstance(cells[-1], str) else cells[-1])
                yield Padding(said, (0, 0, 0, INDENT))


def _finite_difference_line(entry: InputExplanation) -> Text:
    name, fd = entry.input, entry.finite_difference
    if fd is None:
        return Text(f"uᵀJ from finite differences: not available for {name}", style="dim")
    kind = "symmetrised finite differences" if entry.finite_difference_symmetrised else (
        "finite differences")
    line = Text(f"uᵀJ from {kind}: ")
    line.append(matrix_text(fd).replace("\n", "; "))
    error, vjp = entry.max_abs_err, entry.vjp
    if error is not None:
        line.append(f"  (tape.gradient with output_gradients differs by {error:.2g})", style="dim")
    elif vjp is None and np.any(np.asarray(fd.values or 0.0)):
        line.append("  (tape.gradient returned None although finite differences see a"
                    " dependence: the path is cut, see connected)", style="bold red")
    elif vjp is not None and tuple(vjp.shape) != tuple(entry.shape):
        line.append(f"  (tape.gradient returned shape {tuple(vjp.shape)}, not"
                    f" {tuple(entry.shape)})", style="bold red")
    return line


def input_explanation(entry: InputExplanation) -> RenderableType:
    parts: list[RenderableType] = [InputTable(entry)]
    if note := several_text(entry):
        parts.append(Text(note))
    parts += [_hanging("• ", f"{target.output}: {coincide_text(entry, target)}")
              for target in entry.targets]
    parts.append(_finite_difference_line(entry))
    return Group(*parts)


def _hanging(mark: str, text: str | Text) -> Table:
    """`mark` then `text`, its wrapped lines indented under the text's first."""
    grid = Table.grid()
    grid.add_column(no_wrap=True)
    grid.add_column()
    grid.add_row(mark, Text(text) if isinstance(text, str) else text)  # never markup
    return grid


def formulas() -> RenderableType:
    return Group(Text("In general:", style="bold"),
                 *(_hanging("  ", text) for text in FORMULAS.values()))


def render_explanation(explain: Explanation, inputs: Sequence[str] | None = None
                       ) -> RenderableType:
    """All inputs (or the named ones), then the formulas."""
    entries = [e for e in explain.inputs if inputs is None or e.input in inputs]
    parts: list[RenderableType] = []
    for entry in entries:
        parts += [input_explanation(entry), Text("")]
    parts.append(formulas())
    return Group(*parts)
