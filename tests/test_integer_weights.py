"""A Keras weight that reaches the output only through an integer (a cast, round or argmax) is
named as the weight that gets no gradient, at the line of the cut, with why
(fixtures/integer_weights.py); the soft version trains and passes."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck.report import Kind, Status
from tests.conftest import fixture_module

# model, weight, line of the first integer op, its words
CASES = [("learnable_shift", "shift/shift", 17, "Round on the path from shift/shift"),
         ("gather_offset", "sampler/offset", 30, "a cast to int32 on the path from"
                                                 " sampler/offset: integers carry no gradient"),
         ("operator_choice", "node/preference", 43, "ArgMax on the path from node/preference")]


@pytest.mark.parametrize(("name", "weight", "line", "words"), CASES)
def test_a_weight_behind_an_integer_is_named(name: str, weight: str, line: int,
                                             words: str) -> None:
    module = fixture_module("integer_weights")
    report = gradcheck.check(getattr(module, name)(), *getattr(module, f"{name}_inputs"),
                             compiled=False)
    untrained = [c for c in report.checks if c.check == Kind.CONNECTED and c.input == weight]
    assert len(untrained) == 1 and untrained[0].status == Status.WARN
    assert untrained[0].location is not None and untrained[0].location.line == line
    cut = [c for c in report.checks if c.check == Kind.GRAPH_BREAK and c.input == weight]
    assert cut and cut[0].location is not None and cut[0].location.line == line
    said = str(report)
    assert f"the trainable weight {weight} gets no gradient" in said and words in said


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_soft_choice_passes(dtype: type) -> None:
    module = fixture_module("integer_weights")
    report = gradcheck.check(module.soft_operator_choice(), module.x.astype(dtype),
                             compiled=False)
    assert report.ok and all(c.status == Status.PASS for c in report.checks)
