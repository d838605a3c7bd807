"""Complex inputs and outputs, checked as (real, imaginary) parts against TensorFlow's
convention for complex gradients; a grad_fn that conjugates where TensorFlow does not (or the
reverse, or forgets the conjugate of a complex output of real inputs) is named, with the fix;
TensorFlow's own gradient wrong for complex inputs (tensorflow/tensorflow#49946, #62266,
#127713) is named at the op's line with the written-out spelling, which passes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result

import gradcheck
from gradcheck.numerics.mistakes import value_mistake
from gradcheck.options import CheckOptions
from gradcheck.pipeline import TargetRequest, check_request
from gradcheck.report import Kind, Mistake, Report, Status

from .conftest import FIXTURES, fixture_module, fixture_target

MODULE = FIXTURES / "complex_gradients.py"
POINT = [np.array([1 + 2j, 0.5 - 1j, -0.3 + 0.2j])]


def _check(name: str, *args: object, **options: object) -> Report:
    import importlib.util

    spec = importlib.util.spec_from_file_location("complex_gradients", MODULE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return gradcheck.check(getattr(module, name), *(args or POINT), **options)


def test_tensorflows_convention_is_the_one_checked() -> None:
    from gradcheck.engine.runtime import tensorflow

    tf = tensorflow()
    z = tf.constant(1 + 2j, tf.complex128)
    with tf.GradientTape() as tape:
        tape.watch(z)
        loss = tf.math.real(z * tf.math.conj(z))
    assert complex(tape.gradient(loss, z).numpy()) == 2 + 4j  # ∂L/∂Re z + i ∂L/∂Im z


@pytest.mark.parametrize("name", ["square", "conjugate", "modulus", "spectrum", "squared_norm",
                                  "cube"])
@pytest.mark.parametrize("dtype", ["auto", "float32"])
def test_correct_complex_gradients_pass(name: str, dtype: str) -> None:
    point = [POINT[0].astype(np.complex64)] if dtype == "float32" else POINT
    report = _check(name, *point, dtype=dtype)
    assert report.ok, [c.message for c in report.checks if c.status != "pass"]
    assert report.inputs[0].dtype == ("complex64" if dtype == "float32" else "complex128")
    assert report.inputs[0].shape == (3,)


@pytest.mark.parametrize(("name", "ok"), [("squared_norm", True),
                                          ("squared_norm_conjugated", False)])
def test_a_complex_variable_argument_is_checked_as_its_value(name: str, ok: bool) -> None:
    """TF #41557's asker passed a complex tf.Variable: it is checked like a complex tensor
    of the same value, and a grad_fn that conjugates wrongly still fails."""
    from gradcheck.engine.runtime import tensorflow

    tf = tensorflow()
    report = _check(name, tf.Variable(tf.constant(POINT[0], tf.complex128)))
    assert report.ok is ok, [c.message for c in report.checks if c.status != "pass"]
    assert report.inputs[0].dtype == "complex128" and report.inputs[0].shape == (3,)


def test_a_real_input_with_a_complex_output_passes() -> None:
    report = _check("embed", np.array([0.5, 1.0]))
    assert report.ok
    assert (report.outputs[0].dtype, report.outputs[0].shape) == ("complex128", (2,))


@pytest.mark.parametrize(("name", "mistake", "line"), [
    ("squared_norm_conjugated", "conjugated", 38),
    ("cube_unconjugated", "unconjugated", 52),
])
def test_a_grad_fn_with_the_other_conjugation_is_named_at_its_line(
        name: str, mistake: str, line: int) -> None:
    report = check_request(TargetRequest(f"{MODULE}:{name}", path=str(FIXTURES),
                                         inputs_attr=f"{MODULE}:point_inputs"), CheckOptions())
    failed = {c.check: c for c in report.checks if c.status == "fail"}
    assert set(failed) == {"custom-gradient", "jacobian", "vjp", "jvp"}
    custom = failed["custom-gradient"]
    assert custom.cause is not None and custom.cause.mistake == mistake
    assert str(custom.location).endswith(f"complex_gradients.py:{line}")
    assert "tf.math.conj(df/dz)" in (custom.cause.fix or "")


def test_the_mistakes_are_told_apart_from_their_numbers() -> None:
    # f(z) = c·z with c = 1 + 2i on (re, im) parts: [[1, -2], [2, 1]]; its transpose is
    # multiplication by conj(c).
    true = np.array([[1.0, -2.0], [2.0, 1.0]])
    assert value_mistake(true.T, true, 2, 1, "y", complex_input=True).mistake == "unconjugated"
    assert value_mistake(true.T, true, 2, 1, "y").mistake == "transposed"
    real_output = np.array([[2.0, 4.0]])  # L = |z|² at 1+2j: TensorFlow's gradient 2+4j
    conjugated = np.array([[2.0, -4.0]])
    assert value_mistake(conjugated, real_output, 1, 1, "y", complex_input=True).mistake == (
        "conjugated")


def test_the_cli_takes_complex_literals_and_upstreams(monkeypatch: pytest.MonkeyPatch,
                                                      run_cli: Callable[..., Result]) -> None:
    monkeypatch.chdir(FIXTURES)
    result = run_cli(["vjp", "complex_gradients.py:square", "-i", "[1+2j, 0.5-1j]",
                      "--upstream", "[1j, 1.0]", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["inputs"][0] | {"kind": None} == {
        "name": "z", "shape": [2], "dtype": "complex128", "differentiable": True, "kind": None}
    assert any("is complex: checked as its (real, imaginary) parts" in note
               for note in data["notes"])
    result = run_cli(["check", "complex_gradients.py:cube_unconjugated", "-i", "[1+2j, 0.5-1j]"])
    assert result.exit_code == 1
    assert "multiplies the upstream by df/dz where TensorFlow needs its conjugate" in (
        result.stdout)
    assert Path("complex_gradients.py").exists()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_grad_fn_missing_the_conjugate_says_conjugate(dtype: type) -> None:
    module = fixture_module("complex_output_grad_fn")
    args = [np.asarray(v, dtype=dtype) for v in module.displacement_inputs]
    report = gradcheck.check(module.displacement, *args, compiled=False)
    failed = [c for c in report.checks
              if c.check == Kind.CUSTOM_GRADIENT and c.status == Status.FAIL]
    assert {c.input for c in failed} == {"r", "phi"}
    assert all(c.cause is not None and c.cause.mistake == Mistake.UNCONJUGATED_OUTPUT
               for c in failed)
    assert all("conjugate" in c.message and "tf.math.conj(dz_dx)" in c.message
               for c in failed)
    assert all(c.location is not None and c.location.line == 16 for c in failed)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_conjugated_grad_fn_passes(dtype: type) -> None:
    module = fixture_module("complex_output_grad_fn")
    args = [np.asarray(v, dtype=dtype) for v in module.displacement_fixed_inputs]
    assert gradcheck.check(module.displacement_fixed, *args, compiled=False).ok


@pytest.mark.parametrize(("function", "line", "called", "workaround", "dtype"), [
    ("det_loss", 14, "tf.linalg.det", "a * d - b * c", "float32"),
    ("det_loss", 14, "tf.linalg.det", "a * d - b * c", "float64"),
    ("squared_difference_cos", 35, "tf.math.squared_difference",
     "tf.math.real(d * tf.math.conj(d))", "float32"),
    ("xdivy", 46, "tf.math.xdivy", "x / y", "float64")])
def test_a_complex_gradient_tensorflow_gets_wrong_is_named_at_the_op(
        function: str, line: int, called: str, workaround: str, dtype: str) -> None:
    report = gradcheck.check(fixture_target("complex_wrong_gradients", function), dtype=dtype)
    failed = [c for c in report.checks if c.failed]
    assert {c.check for c in failed} == {"jacobian", "vjp"}
    for check in failed:
        assert str(check.location).endswith(f"complex_wrong_gradients.py:{line}")
        assert check.cause is not None and check.cause.mistake == "tensorflow-gradient"
        assert f"TensorFlow's own gradient of {called} is wrong for complex inputs" in (
            check.message)
        assert "not your code" in check.message and workaround in check.message


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_determinant_written_out_passes(dtype: str) -> None:
    report = gradcheck.check(fixture_target("complex_wrong_gradients", "det_loss_written_out"),
                             dtype=dtype)
    assert not [c.message for c in report.checks if c.failed]
