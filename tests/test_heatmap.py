"""Terminal heatmaps of the excess for blocks too large to print as matrices."""

from __future__ import annotations

import io

import numpy as np
import pytest
from rich.console import Console

from gradcheck.check_settings import CheckSettings
from gradcheck.options import options_from
from gradcheck.pipeline import TargetRequest, check_request
from gradcheck.render.heatmap import render_heatmaps
from gradcheck.report import Block, Report, TensorInfo
from tests.conftest import fixture_target


def shown(renderable: object, color: bool) -> str:
    buffer = io.StringIO()
    console = (Console(file=buffer, width=200, force_terminal=True, color_system="standard")
               if color else Console(file=buffer, width=200, no_color=True, color_system=None,
                                     force_terminal=False))
    console.print(renderable)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def wrong_column() -> Report:
    return check_request(TargetRequest(target=fixture_target("wrong_column")),
                         options_from("check", {}),
                         CheckSettings(keep_blocks=True))


def test_no_color_heatmap_of_a_wrong_column(wrong_column: Report) -> None:
    lines = shown(render_heatmaps(wrong_column, color=False), color=False).splitlines()
    assert lines[0].startswith("dy/dx |AD − FD| / allowed, 10×12 (rows: y (10,), columns:"
                               " x (12,), row-major): 10 failing, worst [")
    assert lines[1:3] == ["  0         1", "  012345678901"]
    assert lines[3:13] == [f"{r} .....#......" for r in range(10)]
    assert lines[13] == ("  . ≤0.1  : ≤1  + ≤10  x ≤1000  # >1000  ? kink  ! not finite")
    assert "\x1b[" not in "\n".join(lines)


def test_color_heatmap_uses_colour_not_characters(wrong_column: Report) -> None:
    text = shown(render_heatmaps(wrong_column, color=True), color=True)
    assert "\x1b[" in text and "█" in text and ".....#" not in text


def block(rows: int, columns: int, wrong: dict[tuple[int, int], float]) -> Report:
    fd = np.ones((rows, columns))
    ad = fd.copy()
    allowed = np.full(fd.shape, 1.0)
    for (r, c), value in wrong.items():
        if np.isnan(value):
            allowed[r, c] = np.nan
        else:
            ad[r, c] += value
    return Report("f.py:f", (TensorInfo("x", (columns,), "float64"),),
                  (TensorInfo("y", (rows,), "float64"),), (),
                  blocks=(Block("y", "x", ad, fd, np.zeros_like(fd), allowed, np.ones(rows)),))


def test_levels_kinks_and_non_finite_values() -> None:
    report = block(3, 30, {(0, 1): 0.5, (0, 2): 5.0, (0, 3): 500.0, (0, 4): 1e6,
                           (1, 0): np.nan, (2, 0): np.inf})
    lines = shown(render_heatmaps(report, color=False), color=False).splitlines()
    assert "4 failing" in lines[0] and "worst [2, 0] (not finite)" in lines[0]
    assert lines[3:6] == ["0 .:+x#" + "." * 25, "1 ?" + "." * 29, "2 !" + "." * 29]


def test_only_blocks_between_matrices_and_sixty_by_a_hundred_and_twenty() -> None:
    assert shown(render_heatmaps(block(8, 8, {}), color=False), color=False) == ""
    assert shown(render_heatmaps(block(61, 10, {}), color=False), color=False) == ""
    assert shown(render_heatmaps(block(60, 120, {}), color=False), color=False).count("\n") == 65
    passing = block(10, 10, {})
    assert "all within tolerance" in shown(render_heatmaps(passing, color=False), color=False)
    assert shown(render_heatmaps(passing, color=False, failing_only=True), color=False) == ""
