"""The explanation of tape.gradient (Report.explain) as rich tables, one per input."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from rich.console import Group, RenderableType
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


def _rows(values: Any, row_size: int | None) -> list[list[float]]:
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
    rows = [[f"{v:.6g}" for v in row] for row in _rows(view.values, row_size)]
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


def input_table(entry: InputExplanation) -> Table:
    """Side by side, per target and summed: J, u, 1ᵀJ, uᵀJ and gradient * u."""
    name = entry.input
    size = int(np.prod(entry.shape, dtype=np.int64))
    table = Table(title=f"{name}, shape {tuple(entry.shape)}: what tape.gradient returns",
                  title_justify="left", header_style="bold", show_lines=True, pad_edge=False)
    table.add_column("target y")
    table.add_column(f"J = tape.jacobian(y, {name})\nrows: y, columns: {name}")
    table.add_column("u (upstream)")
    table.add_column(f"tape.gradient(y, {name})\n= 1ᵀJ")
    table.add_column(f"tape.gradient(y, {name},\n  output_gradients=u) = uᵀJ")
    table.add_column(f"tape.gradient(y, {name}) * u\n(the misconception)")
    for target in entry.targets:
        table.add_row(
            target.output, _jacobian_text(target, size), matrix_text(target.upstream),
            _with_error(matrix_text(target.plain), target.error),
            matrix_text(target.vjp), _misconception_text(target.misconception),
        )
    if entry.several_targets:
        table.add_row(
            Text("all targets\n(one call)", style="bold"), "", "",
            _with_error(matrix_text(entry.plain), entry.error),
            Text(matrix_text(entry.vjp), style="bold"),
            _misconception_text(entry.misconception),
        )
    return table


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
    parts: list[RenderableType] = [input_table(entry)]
    if note := several_text(entry):
        parts.append(Text(note))
    parts += [Text(f"• {target.output}: {coincide_text(entry, target)}")
              for target in entry.targets]
    parts.append(_finite_difference_line(entry))
    return Group(*parts)


def formulas() -> RenderableType:
    lines = Text("In general:\n", style="bold")
    for text in FORMULAS.values():
        lines.append(f"  {text}\n", style="")
    lines.rstrip()
    return lines


def render_explanation(explain: Explanation, inputs: Sequence[str] | None = None
                       ) -> RenderableType:
    """All inputs (or the named ones), then the formulas."""
    entries = [e for e in explain.inputs if inputs is None or e.input in inputs]
    parts: list[RenderableType] = []
    for entry in entries:
        parts += [input_explanation(entry), Text("")]
    parts.append(formulas())
    return Group(*parts)
