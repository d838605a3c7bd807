"""Pictures of Jacobian blocks: real fixtures drawn, files checked, outlines read back."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from gradcheck.check_settings import CheckSettings
from gradcheck.errors import UsageError
from gradcheck.kinds.jacobian.evidence import JacobianSymmetric, SymmetricPerturbations
from gradcheck.options import options_from
from gradcheck.pipeline import TargetRequest, check_request
from gradcheck.render.artifacts import (
    artifact_notes,
    require_plotting,
    write_artifacts,
    write_run_artifacts,
)
from gradcheck.render.blocks import BlockView, block_views, excess_of
from gradcheck.render.plot import (
    PLOT_MISSING,
    block_figure,
    outline_segments,
    render_pictures,
    sidecar,
)
from gradcheck.report import (
    Block,
    CheckOutcome,
    CheckResult,
    ExitCode,
    Report,
    RunResult,
    TensorInfo,
)
from tests.conftest import fixture_target

pytest.importorskip("matplotlib")


def kept(name: str, function: str = "f") -> Report:
    """A real report of a fixture, with every Jacobian block kept."""
    return check_request(TargetRequest(target=fixture_target(name, function)),
                         options_from("check", {}),
                         CheckSettings(keep_blocks=True))


@pytest.fixture(scope="module")
def wrong_column() -> Report:
    return kept("wrong_column")


@pytest.fixture(scope="module")
def transposed() -> Report:
    return kept("custom_gradient_mistakes", "transposed")


@pytest.fixture(scope="module")
def cut_path() -> Report:
    return kept("stop_gradient_only_path")


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def panels(figure: object) -> list[object]:
    """The three panels (the colour bars are axes too, without a title)."""
    return [ax for ax in figure.axes if ax.get_title()]  # type: ignore[attr-defined]


def outlined_cells(ax: object) -> set[tuple[int, int]]:
    """The (row, column) cells boxed on a small block's panel, read back from the figure."""
    cells: set[tuple[int, int]] = set()
    for collection in ax.collections:  # type: ignore[attr-defined]
        if collection.get_gid() != "failing-cells":
            continue
        for path in collection.get_paths():
            centre = path.vertices[:4].mean(axis=0)
            cells.add((int(round(centre[1])), int(round(centre[0]))))
    return cells


def boundary_edges(mask: np.ndarray) -> set[tuple[float, float, float, float]]:
    """Unit edges between a set cell and an unset (or outside) one, computed independently."""
    edges = set()
    rows, columns = mask.shape
    for r in range(rows):
        for c in range(columns):
            if not mask[r, c]:
                continue
            for dr, dc, edge in ((-1, 0, (c - .5, r - .5, c + .5, r - .5)),
                                 (1, 0, (c - .5, r + .5, c + .5, r + .5)),
                                 (0, -1, (c - .5, r - .5, c - .5, r + .5)),
                                 (0, 1, (c + .5, r - .5, c + .5, r + .5))):
                inside = 0 <= r + dr < rows and 0 <= c + dc < columns
                if not inside or not mask[r + dr, c + dc]:
                    edges.add(edge)
    return edges


def test_wrong_column_is_one_outlined_column(wrong_column: Report, tmp_path: Path) -> None:
    written = write_artifacts(wrong_column, tmp_path / "plots")
    assert [Path(p).name for p in written] == ["y-x.png", "y-x.json"]
    png = Path(written[0]).read_bytes()
    width, height = png_size(png)
    assert 1200 <= width <= 2000 and 400 <= height <= 1000
    assert len(png) > 20_000
    data = json.loads(Path(written[1]).read_text())
    assert data["panels"] == ["autodiff", "finite_difference", "excess"]
    assert data["shape"] == [10, 12] and data["status"] == "fail"
    assert data["failing"] == [[row, 5] for row in range(10)] and data["failing_count"] == 10
    assert data["worst"]["column"] == 5 and data["worst"]["input_index"] == [5]
    assert data["worst"]["excess"] > 1e5
    # The cause in words (the picture's title), its tag for scripts.
    assert data["cause"].startswith("likely cause: grad_fn returns wrong values for input x,"
                                    " custom_gradient f (line ")
    assert data["mistake"] == "wrong-values" and "wrong-values" not in data["cause"]

    (view,) = block_views(wrong_column)
    figure = block_figure(view)
    assert len(panels(figure)) == 3
    for ax in panels(figure):
        assert outlined_cells(ax) == {(row, 5) for row in range(10)}
        assert ax.get_xlabel() == "input x, shape (12,): element index"
    assert [ax.get_title() for ax in panels(figure)] == [
        "autodiff J (tape.jacobian)", "finite-difference J",
        "|AD − FD| / allowed: 10 of 120 fail"]


def test_transposed_jacobian_is_visible(transposed: Report) -> None:
    (view,) = block_views(transposed)
    assert view.autodiff is not None
    np.testing.assert_allclose(view.autodiff, view.finite_difference.T, atol=1e-8)
    (picture,) = render_pictures(transposed)
    assert picture.stem == "y-x"
    assert picture.sidecar["failing"] == [[0, 1], [1, 0]]
    assert picture.sidecar["worst"]["row"] == 0 and picture.sidecar["worst"]["column"] == 1
    # The same worst element as the jacobian check itself reports.
    jacobian = next(r for r in transposed.checks if r.check == "jacobian")
    assert jacobian.worst_index == (0, 1)
    assert picture.sidecar["mistake"] == "transposed"
    assert "grad_fn uses J where Jᵀ is needed" in picture.sidecar["cause"]
    figure = block_figure(view)
    for ax in panels(figure):
        assert outlined_cells(ax) == {(0, 1), (1, 0)}
        assert ax.get_ylabel() in ("", "output y, shape (2,): element index")
        worst = [p for p in ax.patches if p.get_gid() == "worst"]
        assert worst and all(p.center == (1, 0) for p in worst)


def test_sign_flip_is_visible() -> None:
    (view,) = block_views(kept("custom_gradient_mistakes", "sign_flipped"))
    assert view.autodiff is not None
    np.testing.assert_allclose(view.autodiff, -view.finite_difference, rtol=1e-6)
    assert view.failing.tolist() == [[True, False], [False, True]]


def test_cut_path_draws_fd_and_a_zero_autodiff(cut_path: Report, tmp_path: Path) -> None:
    (block,) = cut_path.blocks  # kept by the core with autodiff None
    assert block.autodiff is None and block.finite_difference.shape == (2, 2)
    (view,) = block_views(cut_path)
    assert view.autodiff is None
    (picture,) = render_pictures(cut_path)
    # y = exp(2x) elementwise: the diagonal carries the dependence autodiff misses.
    assert picture.sidecar["failing"] == [[0, 0], [1, 1]]
    assert picture.sidecar["worst"]["autodiff"] is None
    assert "autodiff returned None (the path is cut): drawn as 0" in picture.sidecar["notes"]
    figure = block_figure(view)
    first = panels(figure)[0]
    assert first.get_title() == "autodiff: None (path cut), drawn as 0"
    assert np.all(first.images[0].get_array() == 0)
    assert outlined_cells(first) == {(0, 0), (1, 1)}
    assert artifact_notes(cut_path) == []


def hand_report(blocks: tuple[Block, ...], checks: tuple[CheckResult, ...] = (),
                inputs: tuple[TensorInfo, ...] = (TensorInfo("x", (2, 2), "float64"),),
                outputs: tuple[TensorInfo, ...] = (TensorInfo("y", (2, 3), "float64"),)
                ) -> Report:
    return Report("hand.py:f", inputs, outputs, checks, blocks=blocks)


def test_higher_rank_blocks_are_rows_of_outputs_and_columns_of_inputs() -> None:
    ad = np.zeros((2, 3, 2, 2))
    fd = ad.copy()
    ad[1, 2, 0, 1] = 1.0  # output element [1, 2] (row 5), input element [0, 1] (column 1)
    allowed = np.full(ad.shape, 1e-6)
    allowed[0, 0, 1, 1] = np.nan  # a kink: never judged
    ad[0, 0, 1, 1] = 7.0
    report = hand_report((Block("y", "x", ad, fd, np.zeros_like(ad), allowed, np.ones((2, 3))),))
    (view,) = block_views(report)
    assert view.shape == (6, 4)
    assert view.failing.sum() == 1 and view.failing[5, 1]
    assert np.isnan(view.excess[0, 3]) and not view.failing[0, 3]
    data = sidecar(view, "y-x.png")
    assert data["worst"]["output_index"] == [1, 2] and data["worst"]["input_index"] == [0, 1]
    figure = block_figure(view)
    first = panels(figure)[0]
    figure.canvas.draw()
    labels = [t.get_text() for t in first.get_xticklabels()]
    assert labels == ["[0,0]", "[0,1]", "[1,0]", "[1,1]"]
    assert "[1,2]" in [t.get_text() for t in first.get_yticklabels()]
    assert outlined_cells(first) == {(5, 1)}
    assert "1 element(s) at a kink, not judged" in view.notes


def test_large_blocks_are_pooled_and_outlined_by_region() -> None:
    rows, columns = 700, 1300
    fd = np.random.default_rng(0).normal(size=(rows, columns))
    ad = fd.copy()
    ad[:, 1000] *= -1.0
    report = hand_report(
        (Block("y", "x", ad, fd, np.zeros_like(fd), np.full(fd.shape, 1e-6), np.ones(rows)),),
        inputs=(TensorInfo("x", (columns,), "float64"),),
        outputs=(TensorInfo("y", (rows,), "float64"),))
    (picture,) = render_pictures(report)
    assert picture.sidecar["tile"] == [2, 3]
    assert picture.sidecar["failing_count"] == rows
    assert png_size(picture.png)[0] > 1000
    (view,) = block_views(report)
    figure = block_figure(view)
    segments = [c for c in panels(figure)[2].collections if c.get_gid() == "failing-boundary"]
    assert segments and len(segments[0].get_segments()) == 2 * 350 + 2  # one pooled column


def _block_30_by_40(failing: np.ndarray) -> BlockView:
    fd = np.random.default_rng(1).normal(size=failing.shape)
    ad = np.where(failing, 2.0 * fd + 1.0, fd)
    ad[19, 36] = 50.0  # the worst
    report = hand_report(
        (Block("y", "x", ad, fd, np.zeros_like(fd), np.full(fd.shape, 1e-6), np.ones(30)),),
        inputs=(TensorInfo("x", (40,), "float64"),), outputs=(TensorInfo("y", (30,), "float64"),))
    (view,) = block_views(report)
    return view


def _marks(figure: object) -> dict[str, int]:
    found: dict[str, int] = {}
    for collection in panels(figure)[2].collections:  # type: ignore[attr-defined]
        if collection.get_gid():
            found[collection.get_gid()] = len(collection.get_segments())
    return found


def test_a_large_failing_block_is_outlined_as_one_region_not_540_boxes() -> None:
    failing = np.zeros((30, 40), dtype=bool)
    failing[5:23, 10:] = True  # 18 x 30 = 540 elements, as in fixtures/wrong_block.py
    view = _block_30_by_40(failing)
    assert int(view.failing.sum()) == 540
    figure = block_figure(view)
    assert _marks(figure) == {"failing-boundary": 2 * (18 + 30)}
    worst = [line for line in panels(figure)[2].lines + panels(figure)[2].patches  # type: ignore[attr-defined]
             if line.get_gid() == "worst"]
    assert worst


def test_few_failing_cells_are_boxed_and_scattered_ones_leave_only_the_worst_marked() -> None:
    few = np.zeros((30, 40), dtype=bool)
    few[[1, 7, 19], [2, 30, 36]] = True
    assert _marks(block_figure(_block_30_by_40(few))) == {"failing-cells": 3}
    scattered = np.zeros((30, 40), dtype=bool)
    scattered[::2, ::2] = True  # 300 isolated elements: 1200 edges of outline
    view = _block_30_by_40(scattered)
    figure = block_figure(view)
    assert _marks(figure) == {}
    assert "too scattered to outline" in figure.get_supxlabel()  # type: ignore[attr-defined]


def test_outline_segments_are_the_boundary_of_the_failing_region() -> None:
    mask = np.array([[1, 1, 0], [0, 1, 0], [0, 0, 1]], dtype=bool)
    drawn = {(a[0], a[1], b[0], b[1]) for a, b in outline_segments(mask)}
    assert drawn == boundary_edges(mask)


def test_symmetric_convention_shows_the_symmetric_part() -> None:
    fd = np.array([[[1.0, 0.0], [4.0, 3.0]]])  # reads the lower triangle only
    ad = np.array([[[1.0, 2.0], [2.0, 3.0]]])  # TensorFlow's symmetric part
    allowed = np.full(fd.shape, 1e-6)
    warn = CheckResult("jacobian", "warn", input="x", output="y", max_abs_err=0.0,
                       max_rel_err=0.0, excess=0.0, evidence=JacobianSymmetric(
                           None, None, [1, 2, 2], 0.0, 1e-8, 1e-6,
                           SymmetricPerturbations(3, 0.0, 0.0, 2.0, 1.0, 2), 4))
    report = hand_report((Block("y", "x", ad, fd, np.zeros_like(fd), allowed, np.ones(1)),),
                         (warn,), outputs=(TensorInfo("y", (1,), "float64"),))
    (view,) = block_views(report)
    np.testing.assert_allclose(view.finite_difference, [[1.0, 2.0, 2.0, 3.0]])
    assert not view.failing.any() and view.status == "warn"
    assert any("symmetric part" in note for note in view.notes)


def test_excess_is_judged_like_the_jacobian_check() -> None:
    excess = excess_of(np.array([1.0, 2.0, np.nan, 5.0]), np.array([1.0, 1.0, 1.0, 1.0]),
                       np.array([0.5, 0.5, 0.5, np.nan]))
    assert excess[0] == 0.0 and excess[1] == 2.0 and np.isinf(excess[2]) and np.isnan(excess[3])


def test_missing_matplotlib_is_one_clear_error(monkeypatch: pytest.MonkeyPatch,
                                               transposed: Report, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(UsageError) as caught:
        require_plotting()
    assert caught.value.message == PLOT_MISSING
    assert caught.value.message == ("--plot needs matplotlib: pip install matplotlib (or"
                                    " gradcheck's plot extra)")
    with pytest.raises(UsageError):
        write_artifacts(transposed, tmp_path)
    assert not list(tmp_path.iterdir())


def test_run_plots_failing_checks_only(transposed: Report, wrong_column: Report,
                                       tmp_path: Path) -> None:
    result = RunResult((
        CheckOutcome("transposed one", "a:b", transposed, ExitCode.CHECK_FAILED),
        CheckOutcome("passing", "a:c", hand_report(()), ExitCode.OK),
        CheckOutcome("broken", "a:d", None, ExitCode.USAGE_ERROR, error="no"),
    ))
    written = write_run_artifacts(result, tmp_path)
    assert sorted(str(Path(p).relative_to(tmp_path)) for p in written) == [
        "transposed_one/y-x.json", "transposed_one/y-x.png"]


def test_grad_shape_failures_say_why_they_have_no_picture() -> None:
    report = hand_report((), (CheckResult("grad-shape", "fail", "J * u", input="x",
                                          output="y"),))
    assert render_pictures(report) == []
    assert artifact_notes(report) == [
        "x -> y: no picture, the gradient has the wrong shape, so there is no Jacobian block"]
