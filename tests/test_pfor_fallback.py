"""tape.jacobian's vectorised path failing where the while loop works (tensorflow issue 57705,
rot90 under XLA): the note names the op pfor failed on and tells the user that their own
tape.jacobian calls need experimental_use_pfor=False; where pfor works there is no note."""

from __future__ import annotations

import gradcheck
from gradcheck.evidence.notes import WhileLoopJacobian

from .conftest import fixture_module


def test_the_op_pfor_fails_on_is_named_with_the_fix() -> None:
    module = fixture_module("pfor_fallback")
    for inputs in (module.rot_func_inputs(), module.rot_func32_inputs()):
        report = gradcheck.check(module.rot_func, *inputs, compiled=False)
        assert report.ok
        [note] = [n for n in report.notes if isinstance(n, WhileLoopJacobian)]
        assert note.op == "StatelessIf" and "rot90" in str(note.op_name)
        assert str(note.location).endswith("pfor_fallback.py:15")  # the user's rot90 call
        text = str(note)
        assert "tape.jacobian(..., experimental_use_pfor=True) failed" in text
        assert "pfor could not vectorise op StatelessIf" in text
        assert "in the gradient of rot90/cond, made at" in text
        assert "Dimension 2 in both shapes must be equal" in text
        assert "your own tape.jacobian and tape.batch_jacobian calls on this function need" in text


def test_no_pfor_note_where_the_vectorised_jacobian_works() -> None:
    module = fixture_module("pfor_fallback")
    report = gradcheck.check(module.rot_plain, *module.rot_plain_inputs(), compiled=False)
    assert report.ok
    assert not [n for n in report.notes if isinstance(n, WhileLoopJacobian)]
    assert not any("experimental_use_pfor" in str(n) for n in report.notes)


def test_a_loaded_lstm_saved_model_names_the_while_loop_pfor_fails_on(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # tensorflow#57343: tape.jacobian's pfor fails on a loaded SavedModel's LSTM.
    module = fixture_module("pfor_fallback")
    module.save_lstm(str(tmp_path / "lstm"))
    report = gradcheck.check(module.lstm_predictor(str(tmp_path / "lstm")), *module.lstm_inputs,
                             wrt="inputs", compiled=False, kinds=frozenset({"jacobian"}))
    assert report.ok
    [note] = [n for n in report.notes if isinstance(n, WhileLoopJacobian)]
    assert note.op == "StatelessWhile"
    assert str(note.location).endswith("pfor_fallback.py:49")  # the call of the loaded model
    text = " ".join(str(note).split())
    assert "pfor could not vectorise op StatelessWhile" in text
    assert "in the gradient of while" in text
    assert "need experimental_use_pfor=False too" in text
