"""Pictures of Jacobian blocks (matplotlib, imported only here and only when drawing): per
(output, input) block, autodiff J, finite-difference J and |AD − FD| / allowed side by side,
the failing elements outlined and the worst marked; a sidecar dict says what was drawn."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.errors import UsageError
from gradcheck.render.blocks import (
    CUT_PATH_FRACTION,
    BlockView,
    block_views,
    element_index,
    slug,
)
from gradcheck.render.pooling import drawn_matrices, tile_of
from gradcheck.report import Report
from gradcheck.spelling import format_index

PLOT_MISSING = "--plot needs matplotlib: pip install matplotlib (or gradcheck's plot extra)"
PANELS = ("autodiff", "finite_difference", "excess")
# Blocks up to this many rows and columns get every index as a tick and values in the cells.
LABEL_EVERY = 16
ANNOTATE_CELLS = 8
# Sidecars list at most this many failing elements (the count is always exact).
MAX_LISTED = 10_000
# Up to this many cells per axis the worst element gets a circle, and when at most MAX_BOXES
# elements fail each gets its own box; more are outlined as regions (boxes would hide the
# colours), or, when the regions are too scattered to read, only the worst is marked.
BOX_CELLS = 40
MAX_BOXES = 24
MAX_OUTLINE_EDGES = 400
INSET = 0.07
DPI = 100
OUTLINE = "#111111"
WORST_COLOUR = "#ffd400"
# Below 1 (within tolerance): white to grey; above 1 (failing): yellow to dark red.
EXCESS_COLOURS = ((0.0, "#ffffff"), (0.5, "#9a9a9a"), (0.5, "#fed976"), (0.75, "#fc4e2a"),
                  (1.0, "#67000d"))
KINK_COLOUR = "#9ecae1"


@dataclass(frozen=True)
class Picture:
    """One block's PNG and the sidecar describing it; `stem` names both files."""

    stem: str
    png: bytes
    sidecar: dict[str, Any]


def require_matplotlib() -> Any:
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError(PLOT_MISSING) from None
    del matplotlib
    return Figure


def outline_segments(mask: np.ndarray) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """Unit edges around the set cells of a (rows, columns) mask, in imshow coordinates
    (cell (r, c) spans c ± 0.5, r ± 0.5); shared edges of neighbouring cells are left out."""
    padded = np.pad(np.asarray(mask, dtype=bool), 1)
    segments: list[tuple[tuple[float, float], tuple[float, float]]] = []
    # Horizontal edges: between padded rows i and i+1 (y = i - 0.5 in the mask's rows).
    for i, j in np.argwhere(padded[:-1, 1:-1] != padded[1:, 1:-1]):
        y = i - 0.5
        segments.append(((j - 0.5, y), (j + 0.5, y)))
    # Vertical edges: between padded columns j and j+1.
    for i, j in np.argwhere(padded[1:-1, :-1] != padded[1:-1, 1:]):
        x = j - 0.5
        segments.append(((x, i - 0.5), (x, i + 0.5)))
    return segments


def _index_text(shape: tuple[int, ...], flat: int) -> str:
    index = element_index(shape, flat)
    return str(index[0]) if len(index) == 1 else format_index(index, ",")


def _set_ticks(axis: Any, count: int, shape: tuple[int, ...], tile: int) -> None:
    """Ticks at element indices (multi-indices for higher-rank tensors)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

    if not shape:
        axis.set_major_locator(FixedLocator([0]))
        axis.set_major_formatter(FuncFormatter(lambda value, position: ""))
        return
    if count <= LABEL_EVERY and tile == 1:
        axis.set_major_locator(FixedLocator(list(range(count))))
    else:
        axis.set_major_locator(MaxNLocator(nbins=8, integer=True))

    def label(value: float, position: Any) -> str:
        flat = int(round(value)) * tile
        total = math.prod(shape)
        return _index_text(shape, flat) if 0 <= flat < total else ""

    axis.set_major_formatter(FuncFormatter(label))


def _axis_label(role: str, name: str, shape: tuple[int, ...]) -> str:
    if not shape:
        return f"{role} {name} (a scalar)"
    flat = ", flattened row-major" if len(shape) > 1 else ""
    return f"{role} {name}, shape {tuple(shape)}: element index{flat}"


def _annotate(ax: Any, matrix: np.ndarray, limit: float) -> None:
    rows, columns = matrix.shape
    if rows > ANNOTATE_CELLS or columns > ANNOTATE_CELLS:
        return
    size = 9 if max(rows, columns) <= 4 else 7
    for r in range(rows):
        for c in range(columns):
            value = matrix[r, c] + 0.0  # no "-0"
            dark = limit > 0 and np.isfinite(value) and abs(value) > 0.6 * limit
            ax.text(c, r, f"{value:.3g}", ha="center", va="center", fontsize=size,
                    color="white" if dark else "black")


def _excess_axis(view: BlockView) -> tuple[str, str, float]:
    """Title, colour-bar label, and the factor from the excess to the value drawn."""
    if view.measure == "block-scale":
        return ("|AD − FD| / max |FD|",
                f"|AD − FD| / max |FD| (log; > {CUT_PATH_FRACTION:g} outlined)", CUT_PATH_FRACTION)
    return "|AD − FD| / allowed", "|AD − FD| / allowed (log; > 1 fails)", 1.0


def _title(view: BlockView) -> str:
    rows, columns = view.shape
    status = (view.status or "").upper()
    title = f"d{view.output}/d{view.input}  {status}  {rows}×{columns} block"
    worst = view.worst
    failing = int(view.failing.sum())
    if worst is not None and failing:
        r, c = worst
        title += (f": {failing} of {view.failing.size} elements fail; worst"
                  f" {view.output}{format_index(view.output_index(r) or None)} /"
                  f" {view.input}{format_index(view.input_index(c) or None)}")
        if view.measure == "allowed":
            title += f" at {_number(view.excess[r, c])}× the allowed error"
    elif worst is not None:
        title += f": every element within tolerance (at most {view.max_excess:.2g}× allowed)"
    if view.cause:
        title += "\n" + view.cause
    return title


def _number(value: float) -> str:
    return "inf" if not np.isfinite(value) else f"{value:.3g}"


def _log_ticks(bottom: int, top: int) -> list[int]:
    step = max(1, math.ceil((top - bottom) / 7))
    return [k * step for k in range(math.ceil(bottom / step), top // step + 1)]


def failing_marks(failing: np.ndarray, small: bool) -> tuple[str, list[Any]]:
    """How the failing elements are drawn: ("cells", boxes) when few fail in a small block,
    ("boundary", segments) around the failing regions, or ("worst-only", []) when those are
    too scattered to outline (the colours of the excess panel show them)."""
    if small and int(failing.sum()) <= MAX_BOXES:
        inset = 0.5 - INSET
        return "cells", [[(c - inset, r - inset), (c + inset, r - inset), (c + inset, r + inset),
                          (c - inset, r + inset), (c - inset, r - inset)]
                         for r, c in np.argwhere(failing)]
    segments = outline_segments(failing)
    # Mostly isolated elements (about 4 edges each, where a region has its perimeter only).
    scattered = len(segments) > max(MAX_OUTLINE_EDGES, 3 * int(failing.sum()))
    return ("worst-only", []) if scattered else ("boundary", segments)


def _mark_failing(ax: Any, marks: tuple[str, list[Any]], width: float) -> None:
    """The boxes or outlines of failing_marks, with a white halo that keeps them visible on
    any colour."""
    from matplotlib import patheffects
    from matplotlib.collections import LineCollection

    kind, lines = marks
    if lines:
        drawn = LineCollection(lines, colors=OUTLINE, linewidths=width, gid=f"failing-{kind}")
        drawn.set_path_effects([patheffects.withStroke(linewidth=width + 2.0,
                                                       foreground="white")])
        ax.add_collection(drawn)


def _mark_worst(ax: Any, row: int, column: int, small: bool) -> None:
    from matplotlib.patches import Circle

    if small:
        for width, colour in ((3.2, "black"), (1.5, WORST_COLOUR)):
            ax.add_patch(Circle((column, row), 0.34, fill=False, linewidth=width,
                                edgecolor=colour, gid="worst"))
        return
    for width, colour in ((3.0, "black"), (1.4, WORST_COLOUR)):
        ax.plot([column], [row], marker="o", markersize=15, markerfacecolor="none",
                markeredgecolor=colour, markeredgewidth=width, gid="worst")


def _jacobian_panels(figure: Any, axes: Any, view: BlockView, drawn: Any, aspect: str) -> None:
    """Autodiff and finite-difference J on one shared, symmetric colour scale."""
    from matplotlib.colors import LinearSegmentedColormap, Normalize

    values = np.concatenate([drawn.autodiff[np.isfinite(drawn.autodiff)],
                             drawn.finite_difference[np.isfinite(drawn.finite_difference)]])
    limit = float(np.max(np.abs(values), initial=0.0)) or 1.0
    j_norm = Normalize(-limit, limit)
    j_map = LinearSegmentedColormap.from_list(
        "j", ["#2166ac", "#92c5de", "#f7f7f7", "#f4a582", "#b2182b"]).with_extremes(bad="black")
    ad_title = ("autodiff J (tape.jacobian)" if view.autodiff is not None
                else "autodiff: None (path cut), drawn as 0")
    for ax, matrix, title in ((axes[0], drawn.autodiff, ad_title),
                              (axes[1], drawn.finite_difference, "finite-difference J")):
        image = ax.imshow(matrix, cmap=j_map, norm=j_norm, interpolation="nearest",
                          aspect=aspect)
        ax.set_title(title, fontsize=10)
        _annotate(ax, matrix, limit)
    figure.colorbar(image, ax=list(axes[:2]), shrink=0.9, label="∂output/∂input (shared scale)")


def _excess_panel(figure: Any, ax: Any, view: BlockView, drawn: Any, aspect: str) -> int:
    """|AD − FD| / allowed on a log scale centred on 1; returns how many elements fail."""
    from matplotlib.colors import LinearSegmentedColormap, TwoSlopeNorm

    excess_title, excess_label, factor = _excess_axis(view)
    centre = math.log10(factor)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log10(drawn.excess * factor)
    finite = logs[np.isfinite(logs)]
    top = max(int(centre) + 1, math.ceil(float(np.max(finite, initial=centre))))
    bottom = int(centre) - max(3, top - int(centre))
    logs = np.where(np.isposinf(logs), top, np.where(np.isneginf(logs), bottom, logs))
    excess_map = LinearSegmentedColormap.from_list(
        "excess", list(EXCESS_COLOURS)).with_extremes(bad=KINK_COLOUR)
    failing = int(view.failing.sum())
    excess_title += (f": {failing} of {view.failing.size} fail" if failing
                     else ": all within tolerance")
    image = ax.imshow(np.clip(logs, bottom, top), cmap=excess_map,
                      norm=TwoSlopeNorm(centre, bottom, top), interpolation="nearest",
                      aspect=aspect)
    ax.set_title(excess_title, fontsize=10)
    bar = figure.colorbar(image, ax=ax, shrink=0.9, label=excess_label)
    ticks = _log_ticks(bottom, top)
    bar.set_ticks(ticks)
    bar.set_ticklabels([_power(t) for t in ticks])
    return failing


def block_figure(view: BlockView) -> Any:
    """The three-panel matplotlib Figure of one block (no pyplot, no global state)."""
    figure_class = require_matplotlib()
    drawn = drawn_matrices(view)
    rows, columns = drawn.finite_difference.shape
    small = max(rows, columns) <= BOX_CELLS
    ratio = rows / columns
    panel_width = 4.6
    panel_height = float(np.clip(panel_width * ratio, 1.4, 6.5))
    aspect = "equal" if 0.25 <= ratio <= 4 else "auto"
    notes = list(view.notes)
    if drawn.tile != (1, 1):
        notes.append(f"large block: each cell shows a {drawn.tile[0]}×{drawn.tile[1]} tile"
                     " (largest magnitude; outlined if any element fails)")
    marks = failing_marks(drawn.failing, small)
    if marks[0] == "worst-only":
        notes.append("the failing elements are too scattered to outline: the right panel's"
                     " colours show them, the worst is circled")
    height = panel_height + 1.7 + 0.2 * len(notes) + (0.25 if view.cause else 0.0)
    figure = figure_class(figsize=(3 * panel_width + 1.8, height), dpi=DPI,
                          layout="constrained")
    axes = figure.subplots(1, 3, sharex=True, sharey=True)
    figure.suptitle(_title(view), fontsize=10.5)
    _jacobian_panels(figure, axes, view, drawn, aspect)
    failing = _excess_panel(figure, axes[2], view, drawn, aspect)
    width = 2.0 if small else float(np.clip(120.0 / max(rows, columns), 0.6, 2.0))
    worst = view.worst
    for ax in axes:
        _mark_failing(ax, marks, width)
        if worst is not None and failing:
            _mark_worst(ax, worst[0] // drawn.tile[0], worst[1] // drawn.tile[1], small)
        _set_ticks(ax.xaxis, columns, view.input_shape, drawn.tile[1])
        _set_ticks(ax.yaxis, rows, view.output_shape, drawn.tile[0])
        ax.set_xlabel(_axis_label("input", view.input, view.input_shape), fontsize=9)
        if len(view.input_shape) > 1:
            ax.tick_params(axis="x", labelrotation=60)
        ax.set_xlim(-0.5, columns - 0.5)
        ax.set_ylim(rows - 0.5, -0.5)
    axes[0].set_ylabel(_axis_label("output", view.output, view.output_shape), fontsize=9)
    if notes:
        figure.supxlabel("\n".join(notes), fontsize=8.5, color="#444444")
    return figure


def _power(exponent: int) -> str:
    return {-2: "0.01", -1: "0.1", 0: "1", 1: "10", 2: "100"}.get(exponent, f"1e{exponent}")


def figure_png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def _float(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def sidecar(view: BlockView, png: str) -> dict[str, Any]:
    """What the picture shows, as JSON-ready data: the outlined (failing) elements are
    exactly `failing` (row = flat output element, column = flat input element)."""
    failing = np.argwhere(view.failing)
    worst = view.worst
    data: dict[str, Any] = {
        "block": view.name, "output": view.output, "input": view.input,
        "output_shape": list(view.output_shape), "input_shape": list(view.input_shape),
        "shape": list(view.shape), "status": view.status, "panels": list(PANELS),
        "measure": view.measure, "max_excess": _float(view.max_excess),
        "failing_count": int(len(failing)),
        "failing": [[int(r), int(c)] for r, c in failing[:MAX_LISTED]],
        "failing_truncated": bool(len(failing) > MAX_LISTED),
        "worst": None, "cause": view.cause, "mistake": view.mistake,
        "notes": list(view.notes), "png": png,
        "tile": list(tile_of(view.shape)),
    }
    if worst is not None:
        r, c = worst
        data["worst"] = {
            "row": r, "column": c, "output_index": list(view.output_index(r)),
            "input_index": list(view.input_index(c)), "excess": _float(view.excess[r, c]),
            "autodiff": None if view.autodiff is None else _float(view.autodiff[r, c]),
            "finite_difference": _float(view.finite_difference[r, c]),
        }
    return data


def _stems(views: list[BlockView]) -> list[str]:
    stems: list[str] = []
    for view in views:
        stem = f"{slug(view.output)}-{slug(view.input)}"
        candidate, n = stem, 2
        while candidate in stems:
            candidate, n = f"{stem}-{n}", n + 1
        stems.append(candidate)
    return stems


def render_pictures(report: Report) -> list[Picture]:
    """One Picture per block the report kept (CheckSettings(keep_blocks=True)) and per cut
    path with recorded finite differences; raises UsageError when matplotlib is missing."""
    require_matplotlib()
    views = block_views(report)
    pictures = []
    for view, stem in zip(views, _stems(views)):
        png = figure_png(block_figure(view))
        pictures.append(Picture(stem, png, sidecar(view, f"{stem}.png")))
    return pictures
