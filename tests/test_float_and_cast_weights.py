"""A cut is worded as the user wrote it (float() is not .numpy(), nor a NumPy operation), and a
weight behind an integer cast is named at the cast's line although another weight's float()
stops tf.function from tracing f (fixtures/float_and_cast_weights.py, fixtures/python_float.py)."""

from __future__ import annotations

import gradcheck
from gradcheck.report import Kind, Mistake, Report, Status
from tests.conftest import fixture_module


def _breaks(report: Report) -> dict[str, tuple[Mistake, int, str]]:
    found = {}
    for c in report.checks:
        if c.check == Kind.GRAPH_BREAK:
            assert c.cause is not None and c.location is not None
            found[str(c.input)] = (c.cause.mistake, c.location.line, c.message)
    return found


def test_float_of_a_weight_is_float_and_the_cast_weight_is_at_its_cast() -> None:
    module = fixture_module("float_and_cast_weights")
    report = gradcheck.check(module.shifted_softmax(), *module.shifted_softmax_inputs)
    breaks = _breaks(report)
    assert breaks["temperature"][:2] == (Mistake.PYTHON_NUMBER, 42)
    assert breaks["temperature"][2].startswith("float() turns a tensor computed from temperature")
    assert ".numpy()" not in breaks["temperature"][2]
    assert breaks["shift"][:2] == (Mistake.INTEGER_CAST, 43)
    [shift] = [c for c in report.checks if c.check == Kind.CONNECTED and c.input == "shift"]
    assert shift.status == Status.WARN and shift.location is not None
    assert shift.location.line == 43


def test_float_of_each_sample_s_loss_is_float() -> None:
    module = fixture_module("float_and_cast_weights")
    report = gradcheck.check(module.histogram_loss, *module.histogram_loss_inputs)
    breaks = _breaks(report)
    assert set(breaks) == {"y_", "y"}
    for mistake, line, said in breaks.values():
        assert (mistake, line) == (Mistake.PYTHON_NUMBER, 21)
        assert said.startswith("float() turns a tensor computed from")
        assert "NumPy" not in said


def test_float_of_a_sum_is_float() -> None:
    module = fixture_module("python_float")
    report = gradcheck.check(module.f, *module.f_inputs)
    assert _breaks(report)["x"][:2] == (Mistake.PYTHON_NUMBER, 9)
