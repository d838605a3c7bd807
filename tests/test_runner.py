"""`gradcheck run`: isolation, exit-code precedence, modules loaded once, JSON and table output."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from click.testing import Result

from gradcheck.errors import ExitCode
from gradcheck.load.config import load_config
from gradcheck.report import RunResult
from gradcheck.runner import outcome_dict, parse_jobs, run_all
from tests.conftest import FIXTURES

SAMPLE = FIXTURES / "ci_project" / "pyproject.toml"
BAD = FIXTURES / "bad"


@pytest.fixture(scope="module")
def sample() -> RunResult:
    return run_all(load_config(str(SAMPLE)).checks)


def write_config(folder: Path, *tables: str, top: str = "") -> Path:
    path = folder / "gradcheck.toml"
    checks = "".join(f"[[tool.gradcheck.check]]\n{table}\n" for table in tables)
    path.write_text(f"[tool.gradcheck]\n{top}\n{checks}")
    return path


def test_sample_project_every_check_runs_and_the_worst_code_wins(sample: RunResult) -> None:
    by_name = {o.name: o for o in sample.outcomes}
    assert [o.name for o in sample.outcomes] == [
        "softplus", "moments", "clipped-identity", "missing-function"]
    assert {name: (o.status, int(o.exit_code)) for name, o in by_name.items()} == {
        "softplus": ("pass", 0), "moments": ("pass", 0), "clipped-identity": ("fail", 1),
        "missing-function": ("error", 2)}
    assert sample.exit_code == ExitCode.USAGE_ERROR and not sample.ok
    assert [o.name for o in sample.sorted_outcomes()] == [
        "missing-function", "clipped-identity", "softplus", "moments"]
    clipped = by_name["clipped-identity"].report
    assert clipped is not None and clipped.target == "ops:clipped_identity"
    vjp = [r for r in clipped.checks if r.check == "vjp"]
    # 2u instead of u: the error is as large as the largest true entry (rel. to block scale).
    assert vjp and vjp[0].status == "fail" and vjp[0].max_rel_err == pytest.approx(1.0, rel=1e-3)
    assert by_name["missing-function"].error == (
        "attribute 'no_such_function' not found in module 'ops'")


def test_custom_gradients_are_observed_in_every_check_of_a_run(sample: RunResult) -> None:
    # ops.py is imported once, by the first check; the third still sees its custom gradient.
    clipped = {o.name: o for o in sample.outcomes}["clipped-identity"].report
    assert clipped is not None
    sites = [r for r in clipped.checks if r.check == "custom-gradient"]
    assert [r.status for r in sites] == ["fail"]
    assert "clipped_identity (line 16): grad_fn is off by a constant factor of 2" in (
        sites[0].message)
    assert str(sites[0].location).endswith("ops.py:18")


def test_a_crashing_or_hanging_check_never_stops_the_others(tmp_path: Path,
                                                           started_tensorflow: None) -> None:
    path = write_config(
        tmp_path,
        f'name = "raises"\ntarget = "{BAD}/raises.py:f"',
        f'name = "hangs"\ntarget = "{BAD}/hangs.py:f"\ntimeout = 2',
        f'name = "good"\ntarget = "{FIXTURES}/two_in_two_out.py:f"',
        f'name = "no-file"\ntarget = "{BAD}/absent.py:f"',
        f'name = "cut-path"\ntarget = "{FIXTURES}/variable_from_input.py:f"',
    )
    result = run_all(load_config(str(path)).checks)
    assert {o.name: (o.status, int(o.exit_code)) for o in result.outcomes} == {
        "raises": ("error", 3), "hangs": ("error", 3), "good": ("pass", 0),
        "no-file": ("error", 2), "cut-path": ("fail", 1)}
    assert result.exit_code == ExitCode.FUNCTION_ERROR
    hangs = next(o for o in result.outcomes if o.name == "hangs")
    assert hangs.error is not None and hangs.error.startswith(
        "f did not finish within 2s (timeout 2) during the first calls of f and its"
        " gradient; it was running ") and hangs.error.endswith("bad/hangs.py:8")
    assert 0 < hangs.seconds < 2 + 30  # killed at its limit (which counts start-up), not later


def test_a_module_that_disables_eager_execution_does_not_stop_the_next_checks(
        tmp_path: Path, started_tensorflow: None) -> None:
    path = write_config(
        tmp_path,
        f'name = "tf1"\ntarget = "{BAD}/graph_mode.py:f"\ninput = ["[1.0, 2.0]"]',
        f'name = "good"\ntarget = "{FIXTURES}/two_in_two_out.py:f"',
    )
    result = run_all(load_config(str(path)).checks)
    outcomes = {o.name: o for o in result.outcomes}
    assert (outcomes["tf1"].status, int(outcomes["tf1"].exit_code)) == ("error", 2)
    assert outcomes["tf1"].error is not None and "bad/graph_mode.py:3 calls" in outcomes[
        "tf1"].error
    assert outcomes["good"].status == "pass", outcomes["good"].error


@pytest.mark.parametrize(("codes", "expected"), [
    ((), 0), ((0, 0), 0), ((0, 1), 1), ((1, 2, 0), 2), ((2, 3, 1), 3), ((3, 0), 3),
    ((4, 3, 1), 4),
])
def test_exit_code_is_the_highest_of_the_checks(codes: tuple[int, ...], expected: int) -> None:
    from gradcheck.report import CheckOutcome

    outcomes = tuple(CheckOutcome(str(i), "m:f", None, ExitCode(c)) for i, c in enumerate(codes))
    assert RunResult(outcomes).exit_code == expected


def test_each_module_file_is_imported_once_per_run(tmp_path: Path) -> None:
    module = tmp_path / "counted.py"
    module.write_text(
        "from pathlib import Path\nimport tensorflow as tf\n"
        f"with open({str(tmp_path / 'imports.txt')!r}, 'a') as log:\n    log.write('x')\n"
        "def f(x):\n    return tf.sin(x)\n"
        "def g(x):\n    return x * x\n")
    path = write_config(tmp_path, 'name = "g dotted"\ntarget = "counted:g"\nshape = [[3]]',
                        'name = "f"\ntarget = "counted.py:f"\nshape = [[2]]',
                        'name = "g"\ntarget = "counted.py:g"\nshape = [[2]]',
                        'name = "f again"\ntarget = "counted.py:f"\ninput = ["[0.5]"]')
    result = run_all(load_config(str(path)).checks)
    assert [o.status for o in result.outcomes] == ["pass", "pass", "pass", "pass"]
    assert (tmp_path / "imports.txt").read_text() == "x"


def test_outcome_dict_is_the_single_target_json_or_error_object(sample: RunResult) -> None:
    softplus, _, _, missing = (outcome_dict(o) for o in sample.outcomes)
    assert {"name", "gradcheck", "target", "ok", "exit_code", "inputs", "outputs", "checks",
            "seconds"} <= set(softplus)
    assert softplus["name"] == "softplus" and softplus["ok"] is True
    assert {"jacobian", "vjp", "connected"} <= {c["check"] for c in softplus["checks"]}
    assert {c["status"] for c in softplus["checks"]} == {"pass"}
    assert missing == {"name": "missing-function", "gradcheck": softplus["gradcheck"],
                       "target": "ops:no_such_function", "ok": False, "exit_code": 2,
                       "error": "attribute 'no_such_function' not found in module 'ops'",
                       "seconds": missing["seconds"]}


def test_cli_run_json_with_k_and_output_file(tmp_path: Path, in_fixtures: Path,
                                             run_cli: Callable[..., Result]) -> None:
    out = tmp_path / "run.json"
    result = run_cli(["run", "--config", "ci_project/pyproject.toml", "-k", "i",
                      "--format", "json", "-o", str(out)])
    payload = json.loads(out.read_text())  # -o: the report goes to the file only
    assert result.exit_code == 2 and payload["exit_code"] == 2 and payload["ok"] is False
    assert [r["name"] for r in payload["reports"]] == ["clipped-identity", "missing-function"]
    assert [r["exit_code"] for r in payload["reports"]] == [1, 2]
    assert result.stdout == "" and result.stderr == ""


def test_cli_run_table_and_quiet(tmp_path: Path, run_cli: Callable[..., Result],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(SAMPLE.parent)  # the nearest pyproject.toml is the sample's
    result = run_cli(["run", "-k", "clipped", "--no-color"])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("clipped-identity (ops:clipped_identity) ─")
    rows = [line for line in lines if line.startswith("│FAIL") and "│ clipped-identity" in line]
    assert len(rows) == 1
    assert lines[-1].startswith("FAILED 1 check: 1 failed in ")
    assert lines[-1].endswith("(exit code 1)")
    quiet = run_cli(["run", "-k", "soft", "-q", "-o", str(tmp_path / "run.txt")])
    assert quiet.exit_code == 0
    assert quiet.stdout == ""  # -o: the report goes to the file instead, in every format
    written = (tmp_path / "run.txt").read_text()
    assert "softplus" in written and written.rstrip().splitlines()[-1].startswith("OK 1 check:")


def test_cli_timeout_is_the_default_and_a_checks_own_timeout_wins(
        tmp_path: Path, run_cli: Callable[..., Result], started_tensorflow: None) -> None:
    path = write_config(
        tmp_path, f'name = "own"\ntarget = "{BAD}/hangs.py:f"\ntimeout = 1.5',
        f'name = "default"\ntarget = "{BAD}/hangs.py:f"', top="timeout = 600")
    result = run_cli(["run", "--config", str(path), "--timeout", "2", "--format", "json"])
    assert result.exit_code == 3
    errors = [r["error"] for r in json.loads(result.stdout)["reports"]]
    assert errors[0].startswith("f did not finish within 1.5s (timeout 1.5) during ")
    assert errors[1].startswith("f did not finish within 2s (--timeout 2) during ")


def test_every_check_key_takes_effect_in_run(tmp_path: Path,
                                             run_cli: Callable[..., Result]) -> None:
    # Pairs of checks differing by one key; each key must change the verdict or the JSON.
    wrong = f'target = "{FIXTURES}/slightly_wrong_gradient.py:f"\ncommand = "jacobian"'
    two = f'target = "{FIXTURES}/two_in_two_out.py:f"'
    ste = f'target = "{FIXTURES}/straight_through.py:quantised_layer"'
    path = write_config(
        tmp_path,
        f'name = "default"\n{wrong}', f'name = "atol"\n{wrong}\natol = 1e-3',
        f'name = "rtol"\n{wrong}\nrtol = 1e-3', f'name = "dtype"\n{wrong}\ndtype = "float32"',
        f'name = "eps"\n{wrong}\neps = 1e-13',
        f'name = "seed 0"\n{two}\nshape = [[3], [3]]',
        f'name = "seed 5"\n{two}\nshape = [[3], [3]]\nseed = 5',
        f'name = "mode"\n{two}\nmode = "fast"',
        f'name = "probes"\n{two}\nmode = "fast"\nprobes = 3',
        f'name = "ste"\n{ste}', f'name = "surrogate"\n{ste}\nsurrogate = "ste_round"',
    )
    result = run_cli(["run", "--config", str(path), "--format", "json"])
    reports = {r["name"]: r for r in json.loads(result.stdout)["reports"]}

    def checks(name: str, kind: str) -> list[dict[str, Any]]:
        return [c for c in reports[name]["checks"] if c["check"] == kind]

    codes = {name: r["exit_code"] for name, r in reports.items()}
    # float32 resolves the 1e-4 error too (with its own, measured tolerances).
    assert codes == {"default": 1, "atol": 0, "rtol": 0, "dtype": 1, "eps": 0, "seed 0": 0,
                     "seed 5": 0, "mode": 0, "probes": 0, "ste": 1, "surrogate": 0}
    assert result.exit_code == 1
    tolerances = {name: (checks(name, "jacobian")[0]["details"]["atol"],
                         checks(name, "jacobian")[0]["details"]["rtol"])
                  for name in ("default", "atol", "rtol", "dtype")}
    assert tolerances == {"default": (1e-8, 1e-6), "atol": (1e-3, 1e-6),
                          "rtol": (1e-8, 1e-3), "dtype": (1e-7, 1e-5)}
    assert reports["dtype"]["inputs"][0]["dtype"] == "float32"
    assert reports["default"]["inputs"][0]["dtype"] == "float64"
    # A 1e-13 step: rounding noise dominates the finite differences and their error estimate.
    assert checks("default", "jacobian")[0]["details"]["fd_error_estimate"] < 1e-8
    assert checks("eps", "jacobian")[0]["details"]["fd_error_estimate"] > 1e-4
    # --shape draws the arguments from the seed: d(x * scale)/dx = diag(scale) differs.
    seeded = [np.diag(next(c for c in checks(name, "jacobian")
                           if (c["output"], c["input"]) == ("y[0]", "x"))["details"]["autodiff"])
              for name in ("seed 0", "seed 5")]
    assert not np.allclose(*seeded)
    assert checks("seed 0", "fast") == [] and len(checks("seed 0", "jacobian")) == 4
    assert checks("mode", "jacobian") == []
    assert [c["details"]["probes"] for c in checks("mode", "fast")] == [8]
    assert [c["details"]["probes"] for c in checks("probes", "fast")] == [3]
    assert [c["status"] for c in checks("ste", "custom-gradient")] == ["fail"]
    assert [c["status"] for c in checks("surrogate", "custom-gradient")] == ["warn"]


def test_run_observes_a_file_that_an_earlier_check_in_this_process_imported(
        tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    """A module left in sys.modules by an earlier check must still be executed (observed)
    once per run: otherwise its custom gradients are invisible and a surrogate is not excused."""
    target = f"{FIXTURES}/straight_through.py:quantised_layer"
    assert run_cli(["check", target, "--format", "json"]).exit_code == 1
    config = tmp_path / "pyproject.toml"
    config.write_text(f'[tool.gradcheck]\n[[tool.gradcheck.check]]\ntarget = "{target}"\n'
                      'surrogate = "ste_round"\n')
    result = run_cli(["run", "--config", str(config), "--format", "json"])
    assert result.exit_code == 0, result.stdout


def test_jobs_auto_is_the_cores_this_process_may_use() -> None:
    assert 1 <= parse_jobs("auto") <= len(os.sched_getaffinity(0)) and parse_jobs("3") == 3


def test_the_run_progress_shows_checks_done_and_running() -> None:
    from rich.console import Console

    from gradcheck.render.progress import RunProgress

    checks = [SimpleNamespace(name=name) for name in ("a", "b", "c")]
    with RunProgress(Console(file=io.StringIO()), total=3) as progress:
        progress(checks[0], None)
        progress(checks[1], None)
        (task,) = progress.bar.tasks
        assert (task.completed, task.description) == (0, "running a, b")
        progress(checks[0], "outcome")
        assert (task.completed, task.description) == (1, "running b")
        progress(checks[1], "outcome")
        assert (task.completed, task.description) == (2, "")
