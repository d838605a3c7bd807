"""The command line, through click's CliRunner: exit codes, JSON, files, error lines."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import Result

from .conftest import FIXTURES, fixture_target

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
                               "differentiable": True, "kind": "argument"}]
    assert data["outputs"] == [{"name": "y", "shape": [2], "dtype": "float64",
                                "differentiable": True, "kind": "argument"}]
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


def _jacobian_blocks(data: dict[str, Any]) -> dict[tuple[str, str], Any]:
    return {(c["output"], c["input"]): c["details"]["autodiff"] for c in data["checks"]
            if c["check"] == "jacobian"}


def test_keyword_input_is_used_instead_of_the_module_inputs(run_cli: Run) -> None:
    # two_in_two_out's f_inputs has three elements per argument; these have two.
    result = run_cli(["jacobian", fixture_target("two_in_two_out"), "-i", "[1.0, 2.0]",
                      "-i", "scale=[0.5, 0.25]", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [(i["name"], i["shape"]) for i in data["inputs"]] == [("x", [2]), ("scale", [2])]
    blocks = _jacobian_blocks(data)
    # y[0] = x * scale: d/dx = diag(scale), d/dscale = diag(x).
    np.testing.assert_array_equal(blocks[("y[0]", "x")], [[0.5, 0.0], [0.0, 0.25]])
    np.testing.assert_array_equal(blocks[("y[0]", "scale")], [[1.0, 0.0], [0.0, 2.0]])


def test_shape_inputs_are_random_of_that_shape(run_cli: Run) -> None:
    shaped = run_cli(["check", fixture_target("two_in_two_out"), "--shape", "4",
                      "--shape", "4", "--seed", "3", "--format", "json"])
    assert shaped.exit_code == 0, shaped.output
    assert [i["shape"] for i in json.loads(shaped.stdout)["inputs"]] == [[4], [4]]


def test_inputs_provider_is_used_instead_of_the_module_inputs(run_cli: Run,
                                                              tmp_path: Path) -> None:
    provider = tmp_path / "provide.py"
    provider.write_text("def args():\n    return ([1.0, 2.0],), {'scale': [0.5, 0.25]}\n")
    result = run_cli(["jacobian", fixture_target("two_in_two_out"), "--inputs",
                      f"{provider}:args", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [(i["name"], i["shape"]) for i in data["inputs"]] == [("x", [2]), ("scale", [2])]
    np.testing.assert_array_equal(_jacobian_blocks(data)[("y[0]", "scale")],
                                  [[1.0, 0.0], [0.0, 2.0]])


def test_output_file_written_only_with_a_report(run_cli: Run, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    ok = run_cli(["check", fixture_target("custom_gradient_correct"), "--format", "json",
                  "-o", str(out)])
    assert ok.exit_code == 0 and json.loads(out.read_text())["ok"] is True
    missing = tmp_path / "never.json"
    bad = run_cli(["check", "nosuchmodule_q:f", "-o", str(missing)])
    assert bad.exit_code == 2 and not missing.exists()


def test_output_file_gets_the_table_instead_of_stdout(run_cli: Run, tmp_path: Path) -> None:
    out = tmp_path / "report.txt"
    result = run_cli(["check", fixture_target("custom_gradient_full_jacobian"), "-o", str(out)])
    assert result.exit_code == 1 and result.stdout == ""
    written = out.read_text()
    assert "grad-shape" in written and written.rstrip().splitlines()[-1].startswith("FAILED")


@pytest.mark.parametrize("output_format", ["junit", "json"])
def test_output_file_gets_the_report_alone_and_the_error_document_on_errors(
        run_cli: Run, tmp_path: Path, output_format: str) -> None:
    """-o: the JSON or JUnit goes to the file, not also to stdout; when f raises (exit 3) the
    file still gets the error document, so a CI step that publishes it finds it."""
    good, bad = tmp_path / f"good.{output_format}", tmp_path / f"bad.{output_format}"
    ok = run_cli(["check", fixture_target("custom_gradient_correct"), "--format",
                  output_format, "-o", str(good)])
    assert ok.exit_code == 0 and ok.stdout == "" and good.read_text().strip()
    raised = run_cli(["check", f"{FIXTURES / 'bad' / 'raises.py'}:f", "-i", "[1.0]",
                      "--format", output_format, "-o", str(bad)])
    assert raised.exit_code == 3 and raised.stdout == ""
    assert raised.stderr.startswith("Error: f raised ")
    written = bad.read_text()
    if output_format == "json":
        assert json.loads(written)["exit_code"] == 3
    else:
        assert "<testsuites" in written and "<error" in written


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
    assert result.stderr == "Error: --mode must be one of auto, full, fast, got 'slow'\n"


def test_quiet_prints_only_the_summary(run_cli: Run) -> None:
    target = fixture_target("custom_gradient_correct")
    result = run_cli(["check", target, "-q"])
    assert result.exit_code == 0
    # custom-gradient, connected, jacobian, vjp, jvp, compiled twice: seven, all passing.
    assert result.stdout == f"OK {target}: 7 passed\n"


# Each bundled example's verdict and, when it fails, the finding's check kind and line:
# written out here, independently of gradcheck/demo.py's own expectations.
DEMO_VERDICTS = {
    "custom_gradient_correct.py:f": ("PASS", None, None),
    "custom_gradient_full_jacobian.py:f": ("FAIL", "grad-shape", 12),
    "variable_from_input.py:f": ("FAIL", "graph-break", 7),
    "composed_custom_gradients.py:f": ("FAIL", "custom-gradient", 21),
    "custom_gradient_mistakes.py:transposed": ("FAIL", "custom-gradient", 13),
    "variables_missing_keyword.py:f": ("FAIL", "custom-gradient", 13),
    "stop_gradient_only_path.py:f": ("FAIL", "graph-break", 7),
    "numpy_round_trip.py:f": ("FAIL", "graph-break", 9),
    "integer_cast_partial.py:normalise": ("FAIL", "graph-break", 7),
    "no_false_alarms.py:f": ("PASS", None, None),
    "two_in_two_out.py:f": ("PASS", None, None),
    "dict_output.py:moments": ("PASS", None, None),
    "float32_only.py:f": ("PASS", None, None),
    "gather_indexed_slices.py:f": ("PASS", None, None),
    "natgrad.py:expectation_to_meanvarsqrt": ("PASS", "jacobian", None),  # the symmetric warning
    "hessian.py:numpy_inside": ("FAIL", "second-order", 39),  # the grad_fn through .numpy()
}


def test_demo_runs_every_bundled_example(run_cli: Run) -> None:
    result = run_cli(["demo"], env={"COLUMNS": "2000"})  # wide: one line per example
    assert result.exit_code == 0, result.output
    rows = {}
    for line in result.stdout.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("│").split("│")]
        if len(cells) == 5 and cells[0] in ("PASS", "FAIL", "ERROR"):
            verdict, example, _story, finding, as_expected = cells
            rows[example] = (verdict, finding, as_expected)
    assert set(rows) == set(DEMO_VERDICTS)
    for example, (verdict, kind, line) in DEMO_VERDICTS.items():
        shown, found, as_expected = rows[example]
        assert (shown, as_expected) == (verdict, "yes"), example
        if kind is None:
            assert found == "all checks pass", example
        elif line is None:
            assert found.startswith(f"{kind}: "), example
        else:
            file = example.partition(":")[0]
            assert re.match(rf"{kind} at {re.escape(file)}:{line}: ", found), (example, found)


def test_a_grad_fn_that_raises_is_a_failed_check_at_its_line(run_cli: Run) -> None:
    result = run_cli(["check", fixture_target("custom_gradient_raises"), "--format", "json"])
    assert result.exit_code == 1, result.output
    assert result.stderr == ""  # a finding, not an `Error:`
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["exit_code"] == 1 and "error" not in data
    raised = [c for c in data["checks"] if c["check"] == "custom-gradient"]
    assert raised and all(c["status"] == "fail" for c in raised)
    assert all("raised ValueError: grad_fn not implemented for this case" in c["message"]
               for c in raised)
    # Named after the custom gradient (defined at line 7), located inside its grad_fn
    # (def at line 10), with the raising line 11 shown.
    assert any(c["message"].startswith("custom_gradient f (line 7): ") for c in raised)
    lines = {c["location"].rpartition("custom_gradient_raises.py:")[2] for c in raised}
    assert "11" in lines and lines <= {"10", "11"}
    assert not [c for c in data["checks"] if c["status"] == "pass"]


SLIGHTLY_WRONG = fixture_target("slightly_wrong_gradient")  # grad_fn 1e-4 too large


def _only(data: dict[str, Any], check: str) -> dict[str, Any]:
    (found,) = [c for c in data["checks"] if c["check"] == check]
    return found


@pytest.mark.parametrize(("flags", "code", "status", "dtype", "atol", "rtol"), [
    ((), 1, "fail", "float64", 1e-8, 1e-6),
    (("--rtol", "1e-3"), 0, "pass", "float64", 1e-8, 1e-3),
    (("--atol", "1e-3"), 0, "pass", "float64", 1e-3, 1e-6),
    # float32: realised steps, Richardson over h/2h/4h and measured rounding noise resolve a
    # 1e-4 relative error.
    (("--dtype", "float32"), 1, "fail", "float32", 1e-7, 1e-5),
])
def test_tolerance_and_dtype_flags_decide_the_verdict(
        run_cli: Run, flags: tuple[str, ...], code: int, status: str, dtype: str, atol: float,
        rtol: float) -> None:
    result = run_cli(["jacobian", SLIGHTLY_WRONG, "--format", "json", *flags])
    assert result.exit_code == code, result.output
    data = json.loads(result.stdout)
    assert data["inputs"][0]["dtype"] == dtype
    jacobian = _only(data, "jacobian")
    assert jacobian["status"] == status
    assert (jacobian["details"]["atol"], jacobian["details"]["rtol"]) == (atol, rtol)
    assert jacobian["max_rel_err"] == pytest.approx(1e-4, rel=0.1)


def test_a_loose_rtol_passes_every_check_of_the_check_command(run_cli: Run) -> None:
    result = run_cli(["check", SLIGHTLY_WRONG, "--rtol", "1e-3", "--format", "json"])
    failed = [(c["check"], c["status"]) for c in json.loads(result.stdout)["checks"]
              if c["status"] not in ("pass", "warn")]
    assert result.exit_code == 0 and not failed, failed


def test_eps_sets_the_finite_difference_step(run_cli: Run) -> None:
    default = run_cli(["jacobian", SLIGHTLY_WRONG, "--format", "json"])
    tiny = run_cli(["jacobian", SLIGHTLY_WRONG, "--format", "json", "--eps", "1e-13"])
    # A step of 1e-13 drowns the differences in rounding (about 1e-16 / 1e-13 of |f|): the
    # error estimate grows a million-fold and can no longer resolve the 1e-4 error.
    assert default.exit_code == 1 and tiny.exit_code == 0
    assert _only(json.loads(default.stdout), "jacobian")["details"]["fd_error_estimate"] < 1e-8
    noisy = _only(json.loads(tiny.stdout), "jacobian")
    assert noisy["status"] == "pass" and noisy["details"]["fd_error_estimate"] > 1e-4


def test_float32_input_is_promoted_to_float64_or_kept_with_dtype_float32(
        run_cli: Run, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.array([0.5, -1.0, 2.0], dtype=np.float32))
    args = ["jacobian", fixture_target("two_in_two_out"), "-i", str(tmp_path / "x.npy"),
            "-i", "scale=[1.0, 2.0, 3.0]", "--format", "json"]
    promoted = json.loads(run_cli(args).stdout)
    assert [i["dtype"] for i in promoted["inputs"]] == ["float64", "float64"]
    assert {c["details"]["rtol"] for c in promoted["checks"] if c["check"] == "jacobian"} == {
        1e-6}
    kept = json.loads(run_cli([*args, "--dtype", "float32"]).stdout)
    assert [i["dtype"] for i in kept["inputs"]] == ["float32", "float32"]
    assert {c["details"]["rtol"] for c in kept["checks"] if c["check"] == "jacobian"} == {1e-5}


def test_max_memory_from_the_command_line_chooses_the_mode(run_cli: Run) -> None:
    # 400 inputs x 400 outputs: full mode holds about 7.3MiB of Jacobian-sized arrays.
    args = ["check", fixture_target("custom_gradient_wrong_values", "softplus"), "--shape", "400",
            "--format", "json"]
    tight = json.loads(run_cli([*args, "--max-memory", "1MiB"]).stdout)
    assert {"fast"} <= {c["check"] for c in tight["checks"]}
    assert "jacobian" not in {c["check"] for c in tight["checks"]}
    assert any("over the memory budget (--max-memory 1.0MiB)" in note for note in tight["notes"])
    roomy = json.loads(run_cli([*args, "--max-memory", "16MiB"]).stdout)
    assert "jacobian" in {c["check"] for c in roomy["checks"]}
    assert "fast" not in {c["check"] for c in roomy["checks"]}


@pytest.mark.parametrize(("size", "message"), [
    ("lots", "Error: --max-memory 'lots' must be a size like 512MiB or 2GiB"),
    ("12XB", "Error: --max-memory '12XB' must be a size like 512MiB or 2GiB"),
    ("1e400", "Error: --max-memory '1e400' must be a size like 512MiB or 2GiB"),
    ("1KiB", "Error: --max-memory is 1024 bytes, below 1MiB"),
    ("2PiB", "Error: --max-memory '2PiB' must be a size like 512MiB or 2GiB"),
    ("2000TiB", "Error: --max-memory is 2.0PiB, more than 1PiB"),
])
def test_malformed_max_memory_is_one_error_line(run_cli: Run, size: str, message: str) -> None:
    result = run_cli(["check", fixture_target("custom_gradient_correct"), "--max-memory", size])
    assert result.exit_code == 2
    assert result.stderr == message + "\n" and result.stdout == ""


def test_max_memory_takes_terabytes_and_refuses_the_absurd() -> None:
    from gradcheck.options import OptionError, parse_size

    assert parse_size("1TB") == 10**12 and parse_size("2TiB") == 2 << 40
    with pytest.raises(OptionError, match="must be a size like"):
        parse_size("1e400")


def test_a_bug_of_gradcheck_in_the_command_line_is_exit_4(
        run_cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stands in for a bug in a renderer: one `Error:` line and exit 4, never exit 3."""
    import gradcheck.render.summary

    def broken(result: Any, width: int = 160) -> str:
        raise KeyError("status")

    monkeypatch.setattr(gradcheck.render.summary, "render_run_text", broken)
    config = Path(__file__).parent.parent / "fixtures" / "ci_project" / "pyproject.toml"
    result = run_cli(["run", "--config", str(config), "-k", "soft", "-o", str(tmp_path / "o")])
    assert result.exit_code == 4
    assert result.stderr == "Error: internal error: KeyError: 'status'; please report it\n"
    assert not (tmp_path / "o").exists()


def test_an_80_column_table_keeps_the_location_whole(run_cli: Run) -> None:
    """The numbers' columns make room (the findings below still give them), not the location."""
    result = run_cli(["check", fixture_target("custom_gradient_mistakes", "transposed")],
                     env={"COLUMNS": "80"})
    assert result.exit_code == 1
    rows = [line for line in result.stdout.splitlines() if line.startswith("│FAIL")]
    assert rows and all(len(line) <= 80 for line in result.stdout.splitlines()[:10])
    assert all(line.endswith("custom_gradient_mistakes.py:13│") for line in rows)
    wide = run_cli(["check", fixture_target("custom_gradient_mistakes", "transposed")])
    assert "max rel" in wide.stdout.splitlines()[1]  # 200 columns: every column
