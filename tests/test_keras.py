"""Keras layers and models, and the variables a function reads: every trainable weight is a
source; weights that never get a gradient are found, and where their path is cut."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

import gradcheck
from gradcheck.options import CheckOptions
from gradcheck.pipeline import TargetRequest, check_request
from gradcheck.report import CheckResult, Report

from .conftest import FIXTURES, fixture_target, notes


def _check(function: str, **options: object) -> Report:
    target = f"{FIXTURES / 'keras_models.py'}:{function}"
    return check_request(TargetRequest(target, path=str(FIXTURES)), CheckOptions(**options))


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    """Each model checked once, shared by the tests below."""
    names = ["numpy_model", "frozen_model", "wrong_gradient_model", "two_heads",
             "two_heads_unbuilt", "dense_model", "dropout_model", "uses_module_variable",
             "dense_instance"]
    return {name: _check(name) for name in names}


def _not_passing(report: Report) -> list[CheckResult]:
    return [c for c in report.checks if c.status != "pass"]


def _line(result: CheckResult) -> int:
    assert result.location is not None and result.location.line is not None
    return result.location.line


def test_weights_are_sources_named_by_path(reports: dict[str, Report]) -> None:
    inputs = {i.name: i.kind for i in reports["dense_model"].inputs}
    assert inputs == {"inputs": "argument", "hidden/kernel": "variable",
                      "hidden/bias": "variable", "out/kernel": "variable",
                      "out/bias": "variable"}
    jacobians = {c.input for c in reports["dense_model"].checks if c.check == "jacobian"}
    assert jacobians == set(inputs)


def test_a_correct_model_passes_in_float64_and_float32(reports: dict[str, Report]) -> None:
    for name in ("dense_model", "dense_instance"):
        assert _not_passing(reports[name]) == [], name
    assert {i.dtype for i in reports["dense_model"].inputs} == {"float64"}
    assert {i.dtype for i in reports["dense_instance"].inputs if i.kind == "variable"} == {
        "float32"}
    assert any("float32's" in note for note in notes(reports["dense_instance"]))
    assert any("float64 dtype policy" in note for note in notes(reports["dense_model"]))


def test_weight_copied_with_numpy_is_cut_at_that_line(reports: dict[str, Report]) -> None:
    found = {(c.check, c.status, c.input) for c in _not_passing(reports["numpy_model"])}
    assert ("connected", "fail", "scale/w") in found
    cut = next(c for c in reports["numpy_model"].checks if c.check == "graph-break")
    assert cut.input == "scale/w" and _line(cut) == 14 and ".numpy()" in cut.message
    assert cut.cause is not None and cut.cause.mistake == "numpy-method"


def test_weight_behind_stop_gradient_is_cut_at_that_line(reports: dict[str, Report]) -> None:
    cut = [c for c in reports["frozen_model"].checks if c.check == "graph-break"]
    assert [(c.status, c.input, _line(c)) for c in cut] == [("fail", "shift/b", 24)]
    connected = next(c for c in reports["frozen_model"].checks
                     if c.check == "connected" and c.input == "shift/b")
    assert connected.status == "fail"


def test_wrong_custom_gradient_in_a_layer_is_named(reports: dict[str, Report]) -> None:
    failing = [c for c in reports["wrong_gradient_model"].checks if c.failed]
    assert failing and all(_line(c) == 30 for c in failing)
    assert any("custom_gradient scaled_tanh" in c.message for c in failing)


def test_a_head_off_the_path_never_trains(reports: dict[str, Report]) -> None:
    warned = {c.input for c in _not_passing(reports["two_heads"])
              if c.check == "connected" and c.status == "warn"}
    assert warned == {"unused/kernel", "unused/bias"}
    assert reports["two_heads"].ok
    message = next(c.message for c in reports["two_heads"].checks if c.input == "unused/kernel"
                   and c.status == "warn")
    assert "No gradients provided" in message and "never reads" in message


def test_a_layer_never_called_is_named(reports: dict[str, Report]) -> None:
    warned = [c for c in _not_passing(reports["two_heads_unbuilt"])]
    assert [(c.check, c.status, c.input) for c in warned] == [("connected", "warn", "unused")]


def test_module_level_variable_is_a_source(reports: dict[str, Report]) -> None:
    report = reports["uses_module_variable"]
    assert {(i.name, i.kind) for i in report.inputs} == {("x", "argument"),
                                                         ("scale", "variable")}
    assert report.ok and _not_passing(report) == []


def test_dropout_is_deterministic_in_inference_and_named_in_training(
        reports: dict[str, Report]) -> None:
    assert reports["dropout_model"].ok
    training = _check("dropout_model", training=True)
    random = [c for c in training.checks if c.check == "nondeterminism"]
    assert [c.status for c in random] == ["fail"]
    assert "dropout (Dropout)" in random[0].message
    assert not any(c.check == "jacobian" for c in training.checks)


def test_wrt_selects_sources() -> None:
    only = _check("dense_model", wrt="hidden/bias")
    assert {c.input for c in only.checks if c.check == "jacobian"} == {"hidden/bias"}
    arguments = _check("dense_model", wrt="inputs")
    assert {c.input for c in arguments.checks if c.check == "jacobian"} == {"inputs"}
    with pytest.raises(gradcheck.errors.InputError, match="names no source of f"):
        _check("dense_model", wrt="nope")


@pytest.mark.parametrize("name", ["conv_model", "lstm_model", "attention_model"])
def test_real_layers_have_no_false_alarm(name: str) -> None:
    report = _check(name)
    assert _not_passing(report) == [], [c.message for c in _not_passing(report)]


def test_the_cli_json_lists_variables(run_cli: Callable[..., Result]) -> None:
    result = run_cli(["check", fixture_target("keras_models", "frozen_model"),
                      "--path", str(FIXTURES), "--format", "json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert {"name": "shift/b", "shape": [3], "dtype": "float64", "differentiable": True,
            "kind": "variable"} in data["inputs"]


def _module_check(module: str, function: str, shapes: tuple[str, ...] = ()) -> Report:
    target = f"{FIXTURES / module}.py:{function}"
    return check_request(TargetRequest(target, path=str(FIXTURES), shapes=shapes), CheckOptions())


def _failing(report: Report) -> dict[tuple[str, str | None], int]:
    return {(c.check, c.input): _line(c) for c in report.checks if c.status == "fail"}


def test_a_training_loss_takes_the_model_as_an_argument_and_checks_its_weights(
        in_fixtures: Path, run_cli: Callable[..., Result]) -> None:
    result = run_cli(["check", "keras_training_loss.py:loss", "--format", "json"])
    assert result.exit_code == 0, result.stdout
    data = json.loads(result.stdout)
    assert [(i["name"], i["kind"], i["differentiable"]) for i in data["inputs"]] == [
        ("model", "argument", False), ("x", "argument", True), ("y", "argument", True),
        ("regressor/hidden/kernel", "variable", True), ("regressor/hidden/bias", "variable", True),
        ("regressor/head/kernel", "variable", True), ("regressor/head/bias", "variable", True)]
    jacobians = {c["input"] for c in data["checks"] if c["check"] == "jacobian"}
    assert jacobians == {"x", "y", "regressor/hidden/kernel", "regressor/hidden/bias",
                         "regressor/head/kernel", "regressor/head/bias"}
    assert "model is a Sequential: passed through, not differentiated" in data["notes"]


def test_a_penalty_computed_through_numpy_is_located_in_the_loss() -> None:
    report = _module_check("keras_training_loss", "loss_with_numpy_penalty")
    assert _failing(report) == {("graph-break", "regressor/hidden/kernel"): 25,
                                ("jacobian", "regressor/hidden/kernel"): 25,
                                ("vjp", "regressor/hidden/kernel"): 25}


def test_mixed_precision_gets_float16_tolerances_and_no_false_alarm() -> None:
    report = _module_check("keras_training_loss", "mixed_model", shapes=("2,8",))
    assert _not_passing(report) == [], [c.message for c in _not_passing(report)]
    assert report.outputs[0].dtype == "float16"
    assert any("float16 outputs" in note and "tolerances are float16's" in note
               for note in notes(report))


def test_tf_keras_factory_and_instance_pass(in_fixtures: Path,
                                            run_cli: Callable[..., Result]) -> None:
    for target, dtype in [("build_model", "float64"), ("model", "float32")]:
        result = run_cli(["check", f"tf_keras_models.py:{target}", "--shape", "2,3",
                          "--format", "json"])
        assert result.exit_code == 0, result.stdout
        variables = [i for i in json.loads(result.stdout)["inputs"] if i["kind"] == "variable"]
        assert len(variables) == 4 and {i["dtype"] for i in variables} == {dtype}


def test_tf_keras_weight_copied_with_numpy_is_cut_at_that_line() -> None:
    report = _module_check("tf_keras_models", "numpy_scale_model", shapes=("2,3",))
    assert _failing(report) == {("graph-break", "numpy_scale/w"): 13,
                                ("connected", "numpy_scale/w"): 13, ("vjp", "numpy_scale/w"): 13}


def test_a_factory_that_cannot_build_its_model_is_the_users_error(
        in_fixtures: Path, run_cli: Callable[..., Result]) -> None:
    result = run_cli(["check", "tf_keras_models.py:numpy_scale_model_built", "--shape", "2,3"])
    assert result.exit_code == 3
    assert result.stderr.startswith(
        "Error: numpy_scale_model_built raised NotImplementedError: numpy() is only available"
        " when eager execution is enabled. (in layer \"numpy_scale")
    # Raised inside AutoGraph's rewrite of call(): at the .numpy() line, not the factory's.
    assert result.stderr.rstrip().endswith("(at tf_keras_models.py:13)")


def test_a_wide_model_goes_through_fast_mode_narrowed_to_the_wrong_kernel_row() -> None:
    report = _check("wide_model", mode="fast")
    failed = {(c.check, c.input): c for c in report.checks if c.status == "fail"}
    assert set(failed) == {("custom-gradient", "kernel"), ("fast", "off_by_one/kernel"),
                           ("jvp", "off_by_one/kernel")}
    fast = failed[("fast", "off_by_one/kernel")]
    assert fast.worst_index == (7, 0) and _line(fast) == 162
    assert "the gradient is wrong around off_by_one/kernel[7, 0]" in fast.message
    assert [i.name for i in report.inputs if i.kind == "variable"] == [
        "wide/kernel", "wide/bias", "off_by_one/kernel", "out/kernel", "out/bias"]


def test_the_api_takes_the_flags_as_keywords() -> None:
    model = _keras_fixture().dense_model()
    x = _keras_fixture().dense_model_inputs[0]
    variables = gradcheck.check(model, x, wrt="variables", compiled=False)
    checks = {(c.check, c.input) for c in variables.checks}
    assert ("jacobian", "hidden/kernel") in checks and ("jacobian", "inputs") not in checks
    assert not any(c.check == "compiled" for c in variables.checks)
    second = gradcheck.check(_keras_fixture().uses_module_variable, [0.5, -1.0, 2.0], order=2)
    assert any(c.check == "second-order" and c.status == "pass" for c in second.checks)
    training = gradcheck.check(_keras_fixture().dropout_model(), x, training=True)
    assert any(c.check == "nondeterminism" and c.status != "pass" for c in training.checks)


def _keras_fixture() -> Any:
    from .conftest import fixture_module

    return fixture_module("keras_models")
