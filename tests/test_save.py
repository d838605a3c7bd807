"""--save FILE.npz: keys, shapes and values of the arrays, and the atomic writer."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from gradcheck.check_settings import CheckSettings
from gradcheck.errors import UsageError
from gradcheck.evidence.gradients import CutPath
from gradcheck.options import options_from
from gradcheck.pipeline import TargetRequest, check_request
from gradcheck.render.artifacts import write_artifacts
from gradcheck.render.files import write_file
from gradcheck.render.save import block_arrays, write_npz
from gradcheck.report import Block, CheckResult, Report, TensorInfo
from tests.conftest import fixture_target


def test_a_real_report_saves_every_array_of_its_block(tmp_path: Path) -> None:
    report = check_request(TargetRequest(target=fixture_target("wrong_column")),
                           options_from("check", {}), CheckSettings(keep_blocks=True))
    (path,) = write_artifacts(report, save_file=tmp_path / "out" / "blocks.npz")
    with np.load(path, allow_pickle=False) as saved:
        shapes = {key: saved[key].shape for key in saved.files}
        assert shapes == {
            "y/x/autodiff": (10, 12), "y/x/finite_difference": (10, 12),
            "y/x/error_estimate": (10, 12), "y/x/allowed": (10, 12),
            "y/x/upstream": (10,), "x/vjp": (12,),
        }
        (block,) = report.blocks
        np.testing.assert_array_equal(saved["y/x/autodiff"], block.autodiff)
        np.testing.assert_array_equal(saved["y/x/finite_difference"], block.finite_difference)
        # tape.gradient with the upstream used is uᵀJ of the autodiff Jacobian.
        np.testing.assert_allclose(saved["x/vjp"],
                                   saved["y/x/upstream"] @ saved["y/x/autodiff"], rtol=1e-10)
        # Column 5 is the wrong one.
        wrong = np.abs(saved["y/x/autodiff"] - saved["y/x/finite_difference"]) > (
            saved["y/x/allowed"])
        assert np.flatnonzero(wrong.any(axis=0)).tolist() == [5]


def test_names_with_brackets_and_cut_paths() -> None:
    block = Block("y['mean']", "x", np.ones((2,)), np.ones((2,)), np.zeros(2),
                  np.array([1e-8, np.nan]), np.array(1.0), vjp=np.ones(2))
    cut = CheckResult("connected", "fail", input="w", output="y[1]",
                      evidence=CutPath([[2.0, 0.0], [0.0, 2.0]], magnitude=2.0))
    report = Report("f.py:f", (TensorInfo("x", (2,), "float64"), TensorInfo("w", (2,), "float64")),
                    (TensorInfo("y['mean']", (), "float64"), TensorInfo("y[1]", (2,), "float64")),
                    (cut,), blocks=(block,))
    arrays = block_arrays(report)
    assert sorted(arrays) == sorted([
        "y['mean']/x/autodiff", "y['mean']/x/finite_difference", "y['mean']/x/error_estimate",
        "y['mean']/x/allowed", "y['mean']/x/upstream", "x/vjp",
        "y[1]/w/finite_difference"])
    assert np.isnan(arrays["y['mean']/x/allowed"][1])
    assert arrays["y[1]/w/finite_difference"].shape == (2, 2)


def test_npz_round_trips_every_key(tmp_path: Path) -> None:
    arrays = {"y['mean']/x/autodiff": np.arange(6.0).reshape(2, 3), "x/vjp": np.ones(3)}
    path = write_npz(tmp_path / "a.npz", arrays)
    with np.load(path, allow_pickle=False) as saved:
        assert sorted(saved.files) == sorted(arrays)
        np.testing.assert_array_equal(saved["y['mean']/x/autodiff"], arrays["y['mean']/x/autodiff"])


def test_writes_are_atomic_and_leave_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "file.bin"
    write_file(target, b"old")
    write_file(target, b"new")
    assert target.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["file.bin"]
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True,
                    reason="root can write anywhere")
def test_an_unwritable_folder_is_a_usage_error(tmp_path: Path) -> None:
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(UsageError, match="cannot write"):
            write_file(tmp_path / "x.npz", b"")
    finally:
        tmp_path.chmod(0o700)


def test_a_path_under_a_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError) as caught:
        write_file(tmp_path / "file" / "x.npz", b"")
    assert caught.value.message.startswith(f"cannot write {str(tmp_path / 'file' / 'x.npz')!r}")
    assert [p.name for p in tmp_path.iterdir()] == ["file"]
