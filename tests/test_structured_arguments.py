"""A structured argument (a dict of tensors, a list of arrays, a Keras model's named inputs):
f gets it whole, as given, and each leaf is checked and named like an argument of its own."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from click.testing import Result

import gradcheck
from gradcheck.report import Kind, Status

from .conftest import fixture_module, fixture_target


def _inputs(result: Result) -> list[str]:
    return [i["name"] for i in json.loads(result.stdout)["inputs"] if i["kind"] == "argument"]


@pytest.mark.parametrize(("name", "leaves"), [
    ("dict_f", ["d['a']", "d['b']"]), ("list_f", ["xs[0]", "xs[1]"])])
def test_each_leaf_is_checked_and_named(run_cli: Callable[..., Result], name: str,
                                        leaves: list[str]) -> None:
    result = run_cli(["check", fixture_target("structured_arguments", name), "--format",
                      "json"])
    assert result.exit_code == 0, result.output
    assert _inputs(result) == leaves


def test_a_keras_model_s_named_inputs_come_from_a_dict_literal(run_cli: Callable[..., Result]
                                                               ) -> None:
    result = run_cli(["check", fixture_target("structured_arguments", "model"), "--format",
                      "json", "-i", "{'age': [[0.5]], 'income': [[1.0, 2.0]]}"])
    assert result.exit_code == 0, result.output
    assert _inputs(result) == ["inputs['age']", "inputs['income']"]


def test_a_wrong_custom_gradient_reached_through_a_dict_is_at_its_grad_fn() -> None:
    module = fixture_module("structured_arguments")
    report = gradcheck.check(module.wrong, *module.wrong_inputs)
    failed = {(c.check, c.input) for c in report.checks if c.status == Status.FAIL}
    assert {(Kind.JACOBIAN, "d['b']"), (Kind.VJP, "d['b']")} <= failed
    assert not any(c.input == "d['a']" for c in report.checks if c.failed)
    [jacobian] = [c for c in report.checks if c.check == Kind.JACOBIAN and c.failed]
    assert jacobian.location is not None and jacobian.location.line == 32


def test_a_ragged_tensor_is_refused_in_one_line(run_cli: Callable[..., Result]) -> None:
    result = run_cli(["check", fixture_target("structured_arguments", "ragged_sum")])
    assert result.exit_code == 2
    assert result.output.strip() == (
        "Error: r is a tf.RaggedTensor: gradcheck differentiates dense tensors; pass its"
        " .flat_values and rebuild it inside f")


@pytest.mark.parametrize(("wrt", "checked"), [("d", ["d['a']", "d['b']"]), ("d['b']", ["d['b']"])])
def test_wrt_names_a_structured_argument_or_one_of_its_leaves(
        run_cli: Callable[..., Result], wrt: str, checked: list[str]) -> None:
    result = run_cli(["check", fixture_target("structured_arguments", "dict_f"), "--wrt", wrt,
                      "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert sorted({c["input"] for c in report["checks"] if c["input"]}) == checked
