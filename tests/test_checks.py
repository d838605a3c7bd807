"""The core checks on real fixtures, through the Python API."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import gradcheck
from gradcheck.report import CheckResult, Report

from .conftest import details, fixture_module, notes


def run_fixture(name: str, function: str = "f", **options: object) -> Report:
    module = fixture_module(name)
    inputs = getattr(module, f"{function}_inputs")
    return gradcheck.check(getattr(module, function), *inputs, **options)  # type: ignore[arg-type]


def only(report: Report, check: str, **where: str) -> CheckResult:
    found = [c for c in report.checks if c.check == check
             and all(getattr(c, k) == v for k, v in where.items())]
    assert len(found) == 1, report.checks
    return found[0]


def test_correct_custom_gradient_passes_with_float64_accuracy() -> None:
    report = run_fixture("custom_gradient_correct")
    assert report.ok and report.exit_code == 0
    jacobian = only(report, "jacobian")
    assert jacobian.status == "pass" and jacobian.max_rel_err is not None
    assert jacobian.max_rel_err < 1e-9
    assert details(jacobian)["autodiff"] == [[0.0, 1.0], [2.0, 0.0]]
    assert only(report, "vjp").status == "pass"


def test_full_jacobian_grad_fn_is_a_grad_shape_failure() -> None:
    report = run_fixture("custom_gradient_full_jacobian")
    assert not report.ok and report.exit_code == 1
    shape = only(report, "grad-shape")
    assert shape.status == "fail" and (shape.input, shape.output) == ("x", "y")
    # A function object gets its custom gradient's own finding, at the grad_fn's line.
    assert "returns shape (2, 2) for input x of shape (2,)" in shape.message
    assert "uᵀJ with its input's shape" in shape.message
    assert str(shape.location).endswith(
        "custom_gradient_full_jacobian.py:12")
    assert only(report, "vjp").status == "skip"


def test_variable_built_from_input_cuts_the_path() -> None:
    report = run_fixture("variable_from_input")
    connected = only(report, "connected")
    assert connected.status == "fail"
    assert "the gradient path from x to y is cut" in connected.message
    assert "|dy/dx| up to 2" in connected.message


def test_wrong_values_are_located_by_element() -> None:
    report = run_fixture("custom_gradient_wrong_values", "softplus")
    jacobian = only(report, "jacobian")
    assert jacobian.status == "fail" and jacobian.worst_index is not None
    x = np.array([0.5, -1.0, 2.0])
    expected = 1.0 / (1.0 + np.exp(-x))
    assert np.allclose(np.diag(details(jacobian)["finite_difference"]), expected, rtol=1e-9)
    assert np.allclose(np.diag(details(jacobian)["autodiff"]), 1.0 - expected)
    assert only(report, "vjp").status == "fail"


def test_two_inputs_two_outputs_are_named() -> None:
    report = run_fixture("two_in_two_out")
    assert report.ok
    assert [i.name for i in report.inputs] == ["x", "scale"]
    assert [o.name for o in report.outputs] == ["y[0]", "y[1]"]
    blocks = {(c.output, c.input) for c in report.checks if c.check == "jacobian"}
    assert blocks == {("y[0]", "x"), ("y[1]", "x"), ("y[0]", "scale"), ("y[1]", "scale")}


def test_dict_outputs() -> None:
    report = run_fixture("dict_output", "moments")
    assert report.ok
    assert [o.name for o in report.outputs] == ["y['mean']", "y['var']"]


def test_float32_only_function_falls_back_without_false_alarm() -> None:
    report = run_fixture("float32_only")
    assert report.ok
    assert report.inputs[0].dtype == "float32"
    assert any("does not accept float64" in note for note in notes(report))


def test_gather_indexed_slices_are_densified_and_ints_passed_through() -> None:
    report = run_fixture("gather_indexed_slices")
    assert report.ok
    assert [(i.name, i.differentiable) for i in report.inputs] == [
        ("table", True), ("indices", False)]
    jacobian = only(report, "jacobian")
    assert details(jacobian)["shape"] == [2, 2, 3, 2]
    assert "IndexedSlices" in only(report, "connected").message


def test_unused_input_is_none_and_that_is_fine() -> None:
    report = run_fixture("unused_input")
    assert report.ok
    connected = only(report, "connected", input="unused")
    assert connected.status == "pass" and "does not depend on unused" in connected.message


def test_variable_argument_is_differentiated() -> None:
    variable = tf.Variable([1.0, 2.0], dtype=tf.float32)
    report = gradcheck.check(lambda v: tf.reduce_sum(v**3), variable)
    assert report.ok
    jacobian = only(report, "jacobian")
    assert np.allclose(details(jacobian)["autodiff"], [3.0, 12.0])


def test_all_ones_upstream_is_a_warning() -> None:
    report = run_fixture("two_in_two_out", upstream="ones")
    assert report.ok
    assert {c.status for c in report.checks if c.check == "upstream"} == {"warn"}


def test_kink_is_a_warning_not_a_failure() -> None:
    report = gradcheck.check(tf.nn.relu, np.array([0.0, 1.5]))
    assert report.ok
    kink = only(report, "kink")
    assert kink.status == "warn" and kink.worst_index == (0, 0)
    assert kink.cause is not None and kink.cause.what == "Relu at 0"
    assert kink.message.endswith("move the point away from the kink")  # an argument's point


def test_a_kink_where_two_inputs_tie_is_named_so() -> None:
    report = gradcheck.check(lambda x: tf.maximum(x, 0.5), np.array([0.5, 1.5]))
    kink = only(report, "kink")
    assert kink.cause is not None and kink.cause.what == "Maximum where its two inputs tie"


def test_assert_gradients_raises_with_the_table() -> None:
    module = fixture_module("custom_gradient_full_jacobian")
    with pytest.raises(AssertionError) as info:
        gradcheck.assert_gradients(module.f, *module.f_inputs)
    assert "grad-shape" in str(info.value) and "FAIL" in str(info.value)


def test_api_explain_carries_the_vjp_explanation() -> None:
    report = gradcheck.check(tf.sin, np.array([0.1, 0.2]), upstream=[2.0, 3.0], explain=True)
    assert report.explain is not None
    explained = report.explain.inputs[0]
    assert explained.input == "x" and explained.vjp is not None
    # tape.gradient with output_gradients=u is uᵀJ = u * cos(x) for the elementwise sine.
    assert np.allclose(explained.vjp.values, [2.0 * np.cos(0.1), 3.0 * np.cos(0.2)])
