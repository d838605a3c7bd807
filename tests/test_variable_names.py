"""Variables are named as the user's code names them (closure, tf.Module path, module global),
the same in the custom-gradient rows as in f's own."""

from __future__ import annotations

import numpy as np

import gradcheck

from .conftest import fixture_module

names = fixture_module("variable_names")


def _sources(report: gradcheck.report.Report) -> list[str]:
    return [i.name for i in report.inputs]


def test_a_tf_module_attribute_is_named_by_its_path() -> None:
    report = gradcheck.check(names.module_read, np.array([1.0, 2.0]))
    assert _sources(report) == ["x", "affine.weights.scale", "affine._shift"], report.inputs
    assert report.ok


def test_a_variable_in_a_closure_is_named_by_the_closure_variable() -> None:
    report = gradcheck.check(names.closure_read, np.array([1.0, 2.0]))
    assert _sources(report) == ["x", "bias"]


def test_a_custom_gradients_rows_use_the_same_names_as_fs() -> None:
    report = gradcheck.check(names.site_variables, np.array([1.0, 2.0]))
    assert set(_sources(report)) == {"x", "weight", "offset"}
    named = {c.input for c in report.checks if c.input}
    assert named <= {"x", "weight", "offset"}, named
    assert any(c.failed and c.input == "weight" and c.check == "custom-gradient"
               for c in report.checks), [(c.check, c.input, c.status) for c in report.checks]


def test_a_broken_variables_contract_names_the_variable_as_written() -> None:
    report = gradcheck.check(names.wrong_count, np.array([1.0, 2.0]))
    counted = [c.message for c in report.checks if c.failed and "variable gradient(s)" in c.message]
    assert len(counted) == 1 and "for 1 variable(s) (unnamed)" in counted[0], report.checks
