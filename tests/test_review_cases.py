"""Cases found in review: precision hidden inside f, tf.function, hard points, NaN, names."""

from __future__ import annotations

import json
from collections.abc import Callable

import tensorflow as tf
from click.testing import Result

import gradcheck
from gradcheck.report import Report

from .conftest import FIXTURES


def run(name: str, function: str) -> Report:
    return gradcheck.check(str(FIXTURES / f"{name}.py") + f":{function}")


def statuses(report: Report, check: str) -> set[str]:
    return {c.status for c in report.checks if c.check == check}


def test_float32_inside_a_float64_function_is_judged_in_float32() -> None:
    wrong = run("float32_inside", "wrong")
    assert statuses(wrong, "jacobian") == {"fail"}
    assert any("returns float32 outputs for float64 inputs" in n for n in wrong.notes)
    right = run("float32_inside", "right")
    assert right.ok and statuses(right, "jacobian") == {"pass"}


def test_custom_gradient_inside_tf_function_is_located() -> None:
    report = run("tf_function_custom_gradient", "f")
    site = [c for c in report.checks if c.check == "custom-gradient" and c.failed]
    assert site and site[0].location is not None
    assert site[0].location.endswith("tf_function_custom_gradient.py:11")
    assert "off by a constant factor of 1.3" in site[0].message


def test_hard_points_get_no_false_alarm() -> None:
    for function in ("oscillating", "log_near_zero"):
        report = run("hard_points", function)
        assert report.ok, [(c.check, c.status, c.message) for c in report.checks if c.failed]
        assert statuses(report, "jacobian") == {"pass"}


def test_nan_gradient_is_never_a_pass() -> None:
    report = run("hard_points", "norm_at_zero")
    assert not report.ok
    jacobian = [c for c in report.checks if c.check == "jacobian"][0]
    assert jacobian.status == "fail" and "autodiff nan" in jacobian.message
    assert not [c for c in report.checks if c.check == "graph-break"]


def test_outputs_are_renamed_when_an_input_is_called_y() -> None:
    report = gradcheck.check(lambda x, y: (tf.sin(x) * y, tf.reduce_sum(x**2)),
                             [0.5, 1.0], [2.0, 3.0])
    assert [o.name for o in report.outputs] == ["out[0]", "out[1]"]
    assert [i.name for i in report.inputs] == ["x", "y"]


def test_click_usage_errors_still_print_json(run_cli: Callable[..., Result]) -> None:
    result = run_cli(["check", "--format", "json"])
    assert result.exit_code == 2
    assert json.loads(result.stdout) == {
        "gradcheck": "0.1.0", "target": None, "ok": False, "exit_code": 2,
        "error": "Missing argument 'TARGET'."}
