"""TensorFlow's own gradient, wrong at f's values: a jacobian or vjp failure
caused by a duplicate-index tensor_scatter_nd_update or dynamic_stitch carries that op's line,
says TensorFlow's gradient is at fault and gives the workaround; unique indices pass."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from click.testing import Result

import gradcheck

from .conftest import fixture_module, fixture_target

MODULE = "tensorflow_wrong_gradients"

# (function, op type, the op's line)
WRONG = [
    ("scatter_update", "TensorScatterUpdate", 16),
    ("stitch_overwritten", "DynamicStitch", 26),
    ("stitch_within", "DynamicStitch", 36),
    ("stitch_rows", "DynamicStitch", 48),
]


@pytest.mark.parametrize(("function", "op", "line"), WRONG)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_wrong_tensorflow_gradient_is_named_at_its_line(function: str, op: str, line: int,
                                                        dtype: Any) -> None:
    module = fixture_module(MODULE)
    inputs = [np.asarray(v, dtype) for v in getattr(module, f"{function}_inputs")()]
    report = gradcheck.check(getattr(module, function), *inputs, compiled=False)
    failed = [c for c in report.checks if c.failed]
    assert {c.check for c in failed} == {"jacobian", "vjp"}
    for result in failed:
        assert result.location is not None and result.location.line == line, result.message
        assert result.cause is not None and result.cause.mistake == "tensorflow-gradient"
        assert f"TensorFlow's own gradient of {op} is wrong here" in result.message
        assert "make the indices unique" in result.message


def test_cli_json_names_the_op_and_workaround(run_cli: Callable[..., Result]) -> None:
    result = run_cli(["jacobian", fixture_target(MODULE, "scatter_update"), "--format", "json"])
    assert result.exit_code == 1, result.output
    [failure] = [c for c in json.loads(result.output)["checks"]
                 if c["status"] == "fail"]
    assert failure["location"].endswith("tensorflow_wrong_gradients.py:16")
    assert failure["cause"]["mistake"] == "tensorflow-gradient"
    assert "tf.tensor_scatter_nd_add" in failure["cause"]["fix"]


def test_unique_indices_pass() -> None:
    assert gradcheck.check(fixture_target(MODULE, "scatter_unique"), compiled=False).ok


def test_every_op_found_wrong_has_its_words_and_workaround() -> None:
    from gradcheck.evidence.causes import WrongGradientReason
    from gradcheck.evidence.causes import gradients as words
    from gradcheck.forensics import wrong_gradients as found

    assert set(words._COMPLEX_WRONG) == found._COMPLEX_WRONG_OPS
    assert set(words._XLA_EXACT) == set(found.XLA_UNCONJUGATED_KERNELS)
    assert set(words._WRONG_TENSORFLOW_GRADIENTS) == set(WrongGradientReason)


def test_an_svd_at_repeated_singular_values_is_tensorflow_s_undefined_gradient() -> None:
    """tensorflow#17476: U Vᵀ at a rotation (singular values all 1) is smooth, but the gradient
    through U and V divides by s_i² - s_j²: the failure is at the svd's line, with why; apart
    from repeated values the same function passes."""
    module = fixture_module(MODULE)
    report = gradcheck.check(module.nearest_rotation, *module.nearest_rotation_inputs(),
                             compiled=False)
    failed = [c for c in report.checks if c.failed]
    assert {c.check for c in failed} == {"jacobian", "vjp"}
    for result in failed:
        assert str(result.location).endswith("tensorflow_wrong_gradients.py:70")
        assert "TensorFlow's own gradient of Svd is undefined here" in result.message
        assert "tf.linalg.sqrtm" in result.message
        assert "symmetric-matrix convention" not in result.message
    apart = gradcheck.check(module.nearest_rotation, *module.nearest_rotation_apart_inputs(),
                            compiled=False)
    assert apart.ok, [c.message for c in apart.checks if c.failed]
