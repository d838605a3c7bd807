"""Backward determinism: the VJP taken twice from one forward pass must be bitwise equal; a
grad_fn drawing gradient noise is named at its line, an embedding lookup (whose GPU backward is
nondeterministic) repeats on a CPU and passes."""

from __future__ import annotations

import gradcheck
from gradcheck.kinds.nondeterminism.evidence import BackwardNondeterministic
from gradcheck.report import CheckResult, Kind, Status

from .conftest import fixture_module


def test_gradient_noise_in_a_grad_fn_is_named_at_its_line() -> None:
    module = fixture_module("backward_determinism")
    report = gradcheck.check(module.noisy, *module.noisy_inputs, compiled=False)
    [found] = [c for c in report.checks if c.check == "nondeterminism"]
    assert found.status == "fail" and found.input == "x"
    assert str(found.location).endswith("backward_determinism.py:15")
    assert "RandomStandardNormal" in found.message and "not bitwise equal" in found.message


def test_an_embedding_lookup_repeats_bitwise_on_a_cpu() -> None:
    module = fixture_module("backward_determinism")
    report = gradcheck.check(module.embedding_sum, *module.embedding_sum_inputs,
                             compiled=False)
    assert report.ok and not [c for c in report.checks if c.check == "nondeterminism"]


def test_a_gpu_kernel_gets_the_op_determinism_advice() -> None:
    result = CheckResult(Kind.NONDETERMINISM, Status.FAIL, input="table", evidence=(
        BackwardNondeterministic("embedding_sum", "table", "UnsortedSegmentSum")))
    assert "backward op UnsortedSegmentSum has a nondeterministic GPU kernel" in result.message
    assert "tf.config.experimental.enable_op_determinism()" in result.message
