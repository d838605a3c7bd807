"""The motivating question's code, verbatim: the findings its author needs, in every dtype."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from click.testing import Result

from .conftest import fixture_target

SEED_FINDINGS = {
    # (check, status, line)
    ("grad-shape", "fail", 9),  # return dg * upstream: Jᵀ * u, shape (2, 2) for x of (2,)
    ("custom-gradient", "fail", 8),  # tf.Variable inside grad_fn: pfor tape.jacobian -> None
    ("graph-break", "warn", 5),  # tf.Variable in the forward pass
}


def _findings(result: Result) -> set[tuple[str, str, int]]:
    report = json.loads(result.stdout)
    return {(c["check"], c["status"], int(c["location"].rsplit(":", 1)[1]))
            for c in report["checks"]
            if c["status"] in ("fail", "warn", "error") and c["location"]}


@pytest.mark.parametrize("dtype", ["auto", "float32"])
def test_seed_verbatim_gets_exactly_its_findings(run_cli: Callable[..., Result],
                                                 dtype: str) -> None:
    result = run_cli(["check", fixture_target("seed_question"), "-i", "[1.0, 2.0]",
                      "--dtype", dtype, "--format", "json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert _findings(result) == SEED_FINDINGS
    failing = [c for c in report["checks"] if c["status"] in ("fail", "error")]
    assert len(failing) == 2  # one finding, one row
    shape = next(c for c in failing if c["check"] == "grad-shape")
    assert "returned Jᵀ * upstream" in shape["message"]
    assert "(2, 2) for input x of shape (2,)" in shape["message"]
    assert "tf.linalg.matvec" in shape["message"]
    # Findings are data: the message is rendered from this cause.
    assert shape["cause"]["mistake"] == "transposed-times-upstream"
    assert shape["cause"]["culprit"] == "custom_gradient f (line 4)"
    assert shape["cause"]["location"] == shape["location"]
    variable = next(c for c in failing if c["check"] == "custom-gradient")
    assert "tape.jacobian" in variable["message"] and "tf.constant" in variable["message"]
    # Nothing gradcheck caused: no dtype-mixing error reaches the findings.
    assert not any("double tensor" in c["message"] for c in report["checks"])
    if dtype != "float32":
        assert any("checked in float32" in note for note in report["notes"])


def test_seed_table_has_no_traceback(run_cli: Callable[..., Result]) -> None:
    result = run_cli(["check", fixture_target("seed_question"), "-i", "[1.0, 2.0]",
                      "--dtype", "float32"])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "seed_question.py:9" in result.output


@pytest.mark.parametrize("fixture, line", [("seed_question", 9), ("seed_question_fixed", 12)])
def test_an_explicit_float64_is_kept_and_the_float32_grad_fn_is_named(
        run_cli: Callable[..., Result], fixture: str, line: int) -> None:
    """--dtype float64 is the user's choice: a grad_fn whose constants are float32 literals
    cannot run in it, and that is said at its line with the fix (no silent fallback)."""
    result = run_cli(["check", fixture_target(fixture), "-i", "[1.0, 2.0]",
                      "--dtype", "float64", "--format", "json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert ("custom-gradient", "fail", line) in _findings(result)
    mixed = next(c for c in report["checks"] if c["location"]
                 and c["location"].endswith(f":{line}"))
    assert mixed["cause"]["mistake"] == "dtype-mix"
    assert "dtype=upstream.dtype" in mixed["message"]
    assert {i["dtype"] for i in report["inputs"]} == {"float64"}


@pytest.mark.parametrize("dtype", ["auto", "float32"])
def test_seed_written_correctly_passes(run_cli: Callable[..., Result], dtype: str) -> None:
    result = run_cli(["check", fixture_target("seed_question_fixed"), "-i", "[1.0, 2.0]",
                      "--dtype", dtype, "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert {c["status"] for c in report["checks"]} == {"pass"}
    assert {c["check"] for c in report["checks"]} >= {"jacobian", "vjp", "custom-gradient"}
