"""A Keras layer whose call creates a tf.Variable on every call is named at that line, with the
fix (create it in build with add_weight); the correct layer passes
(fixtures/variables_in_call.py)."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck.evidence.gradients import VariableInCall
from gradcheck.report import Kind, Status
from tests.conftest import fixture_module

CASES = [("noisy_net", "NoisyDense", 21), ("tf_keras_noisy_net", "TfKerasNoisyDense", 48)]


@pytest.mark.parametrize(("name", "layer", "line"), CASES)
def test_a_variable_created_in_call_is_named_at_its_line(name: str, layer: str,
                                                         line: int) -> None:
    module = fixture_module("variables_in_call")
    report = gradcheck.check(getattr(module, name), *getattr(module, f"{name}_inputs"),
                             compiled=False)
    found = [c for c in report.checks if isinstance(c.evidence, VariableInCall)]
    assert len(found) == 1 and found[0].check == Kind.CONNECTED
    assert found[0].status == Status.WARN
    assert found[0].location is not None and found[0].location.line == line
    said = str(report)
    assert f"{layer}.call creates a new tf.Variable (bias)" in said
    assert f"in {layer}.build (or __init__) with self.add_weight" in said
    # A failure of the weight tf-keras tracks (the first call's copy) is told by it.
    for failed in (c for c in report.checks if c.failed):
        assert failed.location is not None and failed.location.line == line
        assert failed.attributed_to is not None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_layer_built_with_add_weight_passes(dtype: type) -> None:
    module = fixture_module("variables_in_call")
    report = gradcheck.check(module.fixed_noisy_net, module.x.astype(dtype), compiled=False)
    assert report.ok and all(c.status == Status.PASS for c in report.checks)
    assert not [c for c in report.checks if isinstance(c.evidence, VariableInCall)]


def test_a_layer_constructed_in_call_is_named_at_the_line_that_makes_it() -> None:
    # calmiLovesAI/Basic_CNNs_TensorFlow2#13: DenseBlock makes a BottleNeck on every call. A
    # trace of it fails half-way and leaves DenseBlock's list holding a graph tensor, so f
    # is never traced once its calls are seen to create variables.
    module = fixture_module("variables_in_call")
    report = gradcheck.check(module.dense_block_net, *module.dense_block_net_inputs)
    [found] = [c for c in report.checks if isinstance(c.evidence, VariableInCall)]
    assert found.status == Status.WARN and found.location is not None
    assert found.location.line == 114  # BottleNeck(...) in DenseBlock._make_layer
    said = " ".join(str(report).split())
    assert "DenseBlock.call constructs a new BottleNeck layer, and with it new tf.Variables" in said
    assert "construct the BottleNeck layer(s) once, in DenseBlock.__init__" in said


def test_add_weight_in_call_is_named_at_its_line() -> None:
    # Hirosora/LightCTR#5: CrossNetwork calls self.add_weight in call (tf-keras).
    module = fixture_module("variables_in_call")
    report = gradcheck.check(module.cross_network, *module.cross_network_inputs, compiled=False)
    [found] = [c for c in report.checks if isinstance(c.evidence, VariableInCall)]
    assert found.status == Status.WARN and found.location is not None
    assert found.location.line == 158  # the first self.add_weight in the loop
    said = " ".join(str(report).split())
    assert "CrossNetwork.call creates a new tf.Variable" in said
    assert "in CrossNetwork.build (or __init__) with self.add_weight" in said


def test_layers_made_in_call_explain_every_failure() -> None:
    # Nikolai10/scrabble-gan#2: NonLocalBlock makes its Conv2D layers in call; their new random
    # kernels make f another function on every call, so sigma's failures are theirs.
    module = fixture_module("variables_in_call")
    report = gradcheck.check(module.non_local_block, *module.non_local_block_inputs,
                             wrt="variables", compiled=False)
    [found] = [c for c in report.checks if isinstance(c.evidence, VariableInCall)]
    assert found.location is not None and found.location.line == 217  # the first Conv2D
    said = " ".join(str(report).split())
    assert "NonLocalBlock.call constructs a new Conv2D layer" in said
    failed = [c for c in report.checks if c.failed]
    assert failed and all(c.attributed_to is not None and c.location == found.location
                          for c in failed)


def test_tf_keras_imported_after_the_first_question_is_still_a_library() -> None:
    """Whether a frame is the user's was decided once per process, from the libraries loaded
    then: a worker that asked before importing tf_keras took tf_keras's add_weight for the
    user's line (the CrossNetwork case above, depending on test order)."""
    import subprocess
    import sys

    script = ("import sys; from gradcheck.forensics.site_lines import is_library\n"
              "assert 'tf_keras' not in sys.modules\n"
              "assert not is_library('user.py')\n"
              "import tf_keras\n"
              "print(is_library(tf_keras.__file__))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "True"


def test_the_compiled_check_tells_the_same_fix_for_f_it_cannot_trace() -> None:
    module = fixture_module("variables_in_call")
    report = gradcheck.check(module.noisy_net, *module.noisy_net_inputs,
                             kinds=frozenset({"compiled"}))
    [warned] = [c for c in report.checks if c.check == Kind.COMPILED and c.status == Status.WARN]
    assert warned.location is not None and warned.location.line == 21
    assert "cannot trace f (NoisyDense.call creates tf.Variables on every call)" in warned.message
    assert "create it once, in NoisyDense.build (or __init__) with self.add_weight" in (
        warned.message)
    assert "keep tensors in TensorFlow" not in warned.message
