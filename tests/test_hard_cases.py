"""Hard cases: precision hidden inside f, tf.function, hard points, NaN, clashing names."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import tensorflow as tf
from click.testing import Result

import gradcheck
from gradcheck.report import Report

from .conftest import FIXTURES, fixture_module, fixture_target, notes


def run(name: str, function: str) -> Report:
    return gradcheck.check(str(FIXTURES / f"{name}.py") + f":{function}")


def statuses(report: Report, check: str) -> set[str]:
    return {c.status for c in report.checks if c.check == check}


def test_float32_inside_a_float64_function_is_judged_in_float32() -> None:
    wrong = run("float32_inside", "wrong")
    assert statuses(wrong, "jacobian") == {"fail"}
    assert any("returns float32 outputs for float64 inputs" in n for n in notes(wrong))
    right = run("float32_inside", "right")
    assert right.ok and statuses(right, "jacobian") == {"pass"}


def test_a_closure_over_float32_variables_has_no_float64_inputs_to_speak_of() -> None:
    """tensorflow/probability#450's loss closure: no arguments, float32 variables; a note
    about float64 inputs would be gradcheck's own default speaking."""
    scale = tf.Variable(0.5)
    report = gradcheck.check(lambda: tf.reduce_sum(tf.sin(scale * tf.range(3.0))))
    assert report.ok and statuses(report, "jacobian") == {"pass"}
    assert not any("float64" in n for n in notes(report)), notes(report)


def test_custom_gradient_inside_tf_function_is_located() -> None:
    report = run("tf_function_custom_gradient", "f")
    site = [c for c in report.checks if c.check == "custom-gradient" and c.failed]
    assert site and site[0].location is not None
    assert str(site[0].location).endswith("tf_function_custom_gradient.py:11")
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


def test_callable_api_locates_the_grad_fn_as_a_target_does() -> None:
    module = fixture_module("leaky_wrong_slope")
    report = gradcheck.check(module.leaky, *module.leaky_inputs)
    assert statuses(report, "jacobian") == {"fail"}
    assert not [c for c in report.checks if c.check == "graph-break"]
    assert not any("path/to/module.py:function" in note for note in notes(report))
    for checked in (report, run("leaky_wrong_slope", "leaky")):
        site = [c for c in checked.checks if c.check == "custom-gradient" and c.failed][0]
        assert str(site.location).endswith("leaky_wrong_slope.py:11")


def test_a_module_that_cannot_be_imported_twice_is_still_checked(tmp_path: Path) -> None:
    package = tmp_path / "onceonly"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "ops.py").write_text(
        "import tensorflow as tf\n\n\n@tf.RegisterGradient('OnceOnlyGrad')\n"
        "def _grad(op, grad):\n    return grad\n\n\ndef sq(x):\n    return x * x\n")
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("onceonly.ops")
        report = gradcheck.check("onceonly.ops:sq", np.ones(3))
    finally:
        sys.path.remove(str(tmp_path))
    assert report.ok


def test_shape_combines_with_keyword_inputs(run_cli: Callable[..., Result]) -> None:
    result = run_cli(["check", fixture_target("two_in_two_out"), "--shape", "3",
                      "-i", "scale=[1.0, 2.0, 3.0]", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert [i["name"] for i in json.loads(result.stdout)["inputs"]] == ["x", "scale"]


def test_junit_on_a_loading_error_is_an_error_testcase(run_cli: Callable[..., Result]) -> None:
    result = run_cli(["check", "no_such_module_z:f", "--format", "junit"])
    assert result.exit_code == 2
    case = ElementTree.fromstring(result.stdout).find("./testsuite/testcase")
    assert case is not None and case.get("name") == "setup"
    error = case.find("error")
    assert error is not None and "could not import module" in (error.get("message") or "")
