"""What TensorFlow logs about gradcheck's own machinery (its retracing, its vectorisation's
fallbacks) stays out of the user's output."""

from __future__ import annotations

import logging

import numpy as np

import gradcheck
from tests.conftest import fixture_module, notes


def test_pfor_s_dump_of_an_op_it_cannot_vectorise_is_not_shown(caplog) -> None:
    ctc = fixture_module("ctc_loss")
    logits = np.random.default_rng(0).normal(size=(1, 4, 8)).astype(np.float32)
    with caplog.at_level(logging.DEBUG, logger="tensorflow"):
        report = gradcheck.check(ctc.f, logits, kinds=frozenset({"jacobian"}))
    assert report.ok, report
    # gradcheck fell back to calling f point by point, and says so ...
    assert any("point by point" in note for note in notes(report))
    # ... but TensorFlow's own ERROR records of the conversion it gave up are not shown
    assert not [r for r in caplog.records if r.pathname.endswith("pfor.py")]
