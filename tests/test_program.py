"""f bound to its arguments: a frozen program, its evaluation policy, outputs by path."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gradcheck.engine.binding import Prepared, prepare
from gradcheck.engine.program import Evaluation, Origin, SlotKind, flatten_outputs
from gradcheck.engine.recording import record
from gradcheck.engine.runtime import tensorflow
from gradcheck.kinds.jacobian.mode import Mode, choose_mode
from gradcheck.load.inputs import Arguments, name_arguments
from gradcheck.options import CheckOptions
from gradcheck.targets.named import OutputPath
from tests.conftest import fixture_module, notes


def _prepared(name: str, dtype_mode: str = "auto",
              evaluation: Evaluation | None = None) -> Prepared:
    module = fixture_module(name)
    named = name_arguments(module.f, Arguments(module.f_inputs, {}, "test"))
    return prepare(module.f, named, dtype_mode, evaluation)


def test_a_program_is_frozen_and_a_new_dtype_is_a_new_program() -> None:
    program = _prepared("variables_correct").program
    assert program.compute_dtype == "float64" and program.evaluation.dtype == "float64"
    with pytest.raises(dataclasses.FrozenInstanceError):
        program.evaluation = Evaluation("float32")  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        program.slots[0].differentiable = False  # type: ignore[misc]
    in_float32 = program.in_dtype("float32")
    assert in_float32.compute_dtype == "float32" and in_float32.slots == program.slots
    assert program.compute_dtype == "float64"


def test_the_dtype_fallback_is_returned_as_a_note_and_the_policy_kept() -> None:
    phases: list[str] = []
    policy = Evaluation(vectorise=False, wrt="inputs", phase=phases.append)
    prepared = _prepared("float32_only", evaluation=policy)
    assert prepared.program.evaluation == dataclasses.replace(policy, dtype="float32")
    assert len(notes(prepared)) == 1
    assert notes(prepared)[0].startswith("f does not accept float64 inputs")
    assert notes(prepared)[0].endswith("checked in float32, the arguments' own dtype, with"
                                      " float32 tolerances")
    prepared.program.announce("a test")
    assert phases == ["a test"]
    assert notes(_prepared("variables_correct")) == ()


def test_recording_adds_the_variables_f_reads_as_a_new_program() -> None:
    prepared = _prepared("variables_correct", evaluation=Evaluation(wrt="inputs"))
    recording = record(prepared.program)
    assert [s.name for s in prepared.program.slots] == ["x"]
    assert [(s.name, s.kind, s.differentiable) for s in recording.program.slots] == [
        ("x", SlotKind.ARGUMENT, True), ("scale", SlotKind.VARIABLE, False)]
    assert recording.program.slots[1].kind == "variable" and not recording.program.slots[1].argument
    assert notes(recording) == ("--wrt inputs: scale not differentiated",)


def test_outputs_carry_their_path_and_origin() -> None:
    tf = tensorflow()
    result = {"mean": tf.constant([1.0]), "parts": [np.float64(2.0), None, 3]}
    leaves = flatten_outputs(result, "out")
    assert [leaf.path for leaf in leaves] == [
        OutputPath("out", ("mean",)), OutputPath("out", ("parts", 0)),
        OutputPath("out", ("parts", 1)), OutputPath("out", ("parts", 2))]
    assert [leaf.name for leaf in leaves] == [
        "out['mean']", "out['parts'][0]", "out['parts'][1]", "out['parts'][2]"]
    assert [leaf.origin for leaf in leaves] == [
        Origin.TENSOR, Origin.NUMPY, Origin.NONE, Origin.PYTHON]
    assert [leaf.origin for leaf in leaves] == ["tensor", "numpy", "none", "python"]
    assert [leaf.differentiable for leaf in leaves] == [True, True, False, False]


def test_the_mode_choice_is_an_enum_spelled_as_the_flag() -> None:
    program = _prepared("variables_correct").program
    choice = choose_mode(CheckOptions(mode="fast"), program, [(2,)])
    assert choice.mode is Mode.FAST and choice.mode == "fast" and f"{choice.mode}" == "fast"
