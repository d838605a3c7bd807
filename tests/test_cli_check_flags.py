"""The command line's flags for variables, training, second order, compiled parity, pictures
and saved arrays, and annotations in every format."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
from click.testing import Result

from .conftest import FIXTURES, fixture_target

Run = Callable[..., Result]


def _checks(result: Result) -> set[tuple[str, str, str | None]]:
    return {(c["check"], c["status"], c["input"])
            for c in json.loads(result.stdout)["checks"]}


def test_wrt_picks_one_weight_and_no_compiled_drops_the_check(run_cli: Run) -> None:
    result = run_cli(["check", fixture_target("keras_models", "dense_model"), "--path",
                      str(FIXTURES), "--wrt", "hidden/bias", "--no-compiled", "--format", "json"])
    assert result.exit_code == 0, result.stdout
    assert {source for _, _, source in _checks(result)} == {"hidden/bias"}
    assert not any(check == "compiled" for check, _, _ in _checks(result))


def test_wrt_naming_nothing_is_an_input_error(run_cli: Run) -> None:
    result = run_cli(["check", fixture_target("keras_models", "dense_model"), "--path",
                      str(FIXTURES), "--wrt", "nope"])
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: --wrt 'nope' names no source of f")


def test_training_makes_dropout_nondeterministic(run_cli: Run) -> None:
    result = run_cli(["check", fixture_target("keras_models", "dropout_model"), "--path",
                      str(FIXTURES), "--training", "--format", "json"])
    assert result.exit_code == 1
    assert ("nondeterminism", "fail", None) in _checks(result)


def test_order_2_adds_the_second_order_check(run_cli: Run) -> None:
    target = fixture_target("second_order", "square_numpy")
    first = run_cli(["check", target, "--format", "json"])
    second = run_cli(["check", target, "--order", "2", "--format", "json"])
    assert first.exit_code == 0 and second.exit_code == 1
    assert ("second-order", "fail", "x") in _checks(second)


def test_plot_and_save_write_the_blocks(run_cli: Run, tmp_path: Path) -> None:
    pictures, arrays = tmp_path / "plots", tmp_path / "blocks.npz"
    result = run_cli(["check", fixture_target("wrong_column"), "--plot", str(pictures),
                      "--save", str(arrays), "-q"])
    assert result.exit_code == 1
    assert sorted(p.name for p in pictures.iterdir()) == ["y-x.json", "y-x.png"]
    sidecar = json.loads((pictures / "y-x.json").read_text())
    assert {column for _, column in sidecar["failing"]} == {5}
    with np.load(arrays) as saved:
        assert saved["y/x/autodiff"].shape == saved["y/x/finite_difference"].shape == (10, 12)


def test_github_annotations_go_to_stderr_beside_json(run_cli: Run) -> None:
    result = run_cli(["check", fixture_target("seed_question"), "-i", "[1.0, 2.0]",
                      "--format", "json"], env={"GITHUB_ACTIONS": "true"})
    assert json.loads(result.stdout)["exit_code"] == 1
    annotations = [line for line in result.stderr.splitlines() if line.startswith("::error")]
    assert len(annotations) == 2
    assert annotations[0].startswith("::error file=") and "line=9" in annotations[0]
