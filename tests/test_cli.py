"""The command line, through click's CliRunner: exit codes, JSON, files, error lines."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
from click.testing import Result

from .conftest import fixture_target

Run = Callable[..., Result]


def test_check_correct_fixture_exits_0(run_cli: Run) -> None:
    result = run_cli(["check", fixture_target("custom_gradient_correct")])
    assert result.exit_code == 0, result.output
    assert "OK " in result.stdout and "jacobian" in result.stdout


def test_check_full_jacobian_exits_1_with_json(run_cli: Run) -> None:
    result = run_cli(["check", fixture_target("custom_gradient_full_jacobian"),
                      "--format", "json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["exit_code"] == 1
    assert data["inputs"] == [{"name": "x", "shape": [2], "dtype": "float64",
                               "differentiable": True}]
    assert data["outputs"] == [{"name": "y", "shape": [2], "dtype": "float64",
                                "differentiable": True}]
    kinds = {c["check"]: c["status"] for c in data["checks"]}
    assert kinds["grad-shape"] == "fail"
    for check in data["checks"]:
        assert set(check) >= {"check", "status", "input", "output", "message", "location",
                              "max_abs_err", "max_rel_err", "worst_index"}


def test_jacobian_command_shows_matrices(run_cli: Run) -> None:
    result = run_cli(["jacobian", fixture_target("custom_gradient_correct"), "-i", "[1.0, 2.0]"])
    assert result.exit_code == 0
    assert "autodiff (tape.jacobian)" in result.stdout and "finite differences" in result.stdout
    assert "vjp" not in result.stdout.split("dy/dx")[0]


def test_vjp_with_upstream_file(run_cli: Run, tmp_path: Path) -> None:
    np.save(tmp_path / "u.npy", np.array([1.0, 3.0]))
    result = run_cli(["vjp", fixture_target("custom_gradient_correct"), "--upstream",
                      str(tmp_path / "u.npy"), "--format", "json"])
    assert result.exit_code == 0
    vjp = [c for c in json.loads(result.stdout)["checks"] if c["check"] == "vjp"][0]
    assert vjp["status"] == "pass" and vjp["details"]["vjp"] == [6.0, 1.0]


def test_upstream_of_wrong_shape_is_exit_2(run_cli: Run) -> None:
    result = run_cli(["vjp", fixture_target("custom_gradient_correct"), "--upstream",
                      "[1.0, 2.0, 3.0]"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "Error: upstream for y has shape (3,) but y has shape (2,); TensorFlow would silently"
        " broadcast it, so give an upstream of shape (2,)"
    )
    assert "Traceback" not in result.output


def test_keyword_input_and_shape_inputs(run_cli: Run) -> None:
    result = run_cli(["check", fixture_target("two_in_two_out"), "-i", "[1.0, 2.0]",
                      "-i", "scale=[0.5, 0.25]"])
    assert result.exit_code == 0, result.output
    shaped = run_cli(["check", fixture_target("two_in_two_out"), "--shape", "4",
                      "--shape", "4", "--seed", "3", "--format", "json"])
    assert json.loads(shaped.stdout)["inputs"][0]["shape"] == [4]


def test_inputs_provider(run_cli: Run, in_fixtures: Path) -> None:
    result = run_cli(["check", "two_in_two_out:f", "--inputs", "two_in_two_out:f_inputs"])
    assert result.exit_code == 0, result.output


def test_output_file_written_only_with_a_report(run_cli: Run, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    ok = run_cli(["check", fixture_target("custom_gradient_correct"), "--format", "json",
                  "-o", str(out)])
    assert ok.exit_code == 0 and json.loads(out.read_text())["ok"] is True
    missing = tmp_path / "never.json"
    bad = run_cli(["check", "nosuchmodule_q:f", "-o", str(missing)])
    assert bad.exit_code == 2 and not missing.exists()


def test_function_raising_is_exit_3_with_traceback_only_on_request(run_cli: Run,
                                                                   tmp_path: Path) -> None:
    path = tmp_path / "raiser.py"
    path.write_text("def f(x):\n    raise RuntimeError('boom')\n")
    plain = run_cli(["check", f"{path}:f", "-i", "[1.0]"])
    assert plain.exit_code == 3
    assert plain.stderr.strip() == f"Error: f raised RuntimeError: boom (at {path}:2)"
    verbose = run_cli(["check", f"{path}:f", "-i", "[1.0]", "--traceback"])
    assert "Traceback" in verbose.stderr and "raiser.py" in verbose.stderr


def test_error_with_json_format_still_prints_json(run_cli: Run) -> None:
    result = run_cli(["check", "nosuchmodule_q:f", "--format", "json"])
    data = json.loads(result.stdout)
    assert data == {"gradcheck": "0.1.0", "target": "nosuchmodule_q:f", "ok": False,
                    "exit_code": 2, "error": data["error"]}
    assert data["error"].startswith("could not import module 'nosuchmodule_q'")


def test_usage_error_is_one_line(run_cli: Run) -> None:
    result = run_cli(["check", fixture_target("custom_gradient_correct"), "--mode", "slow"])
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("Error: Invalid value for '--mode'")


def test_quiet_prints_only_the_summary(run_cli: Run) -> None:
    result = run_cli(["check", fixture_target("custom_gradient_correct"), "-q"])
    assert result.stdout.strip().splitlines() == [
        f"OK {fixture_target('custom_gradient_correct')}: "
        + result.stdout.strip().split(": ", 1)[1]
    ]


def test_demo_runs_every_bundled_example(run_cli: Run) -> None:
    result = run_cli(["demo"])
    assert result.exit_code == 0, result.output
    assert "every example got its expected verdict" in result.stdout
    assert "custom_gradient_full_jacobian.py" in result.stdout
