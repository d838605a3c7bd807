"""Scaling fallbacks: unvectorisable functions, chunking under a memory budget, lazy x±2h."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import gradcheck
from gradcheck.engine import batch
from gradcheck.engine.batch import BatchEvaluator
from gradcheck.engine.binding import prepare
from gradcheck.engine.program import Program
from gradcheck.engine.recording import record
from gradcheck.load.inputs import Arguments, name_arguments
from gradcheck.numerics import differences, judging, tolerances
from tests.conftest import details, fixture_module, notes


def _program(module_name: str, function: str = "f") -> Program:
    module = fixture_module(module_name)
    f = getattr(module, function)
    named = name_arguments(f, Arguments(getattr(module, f"{function}_inputs"), {}, "test"))
    return prepare(f, named, "auto").program


def test_a_function_that_cannot_be_vectorised_falls_back_to_a_loop() -> None:
    module = fixture_module("python_branch")
    # Enough elements to try tf.vectorized_map (a few are evaluated by calls of f anyway).
    report = gradcheck.check(module.f, np.linspace(-1.0, 2.0, 40), mode="full")
    assert report.ok, [c.message for c in report.checks if c.failed]
    assert any(c.check == "jacobian" and c.status == "pass" for c in report.checks)
    # What failed, and where in f: float() of a tensor, which only an eager call can do.
    assert any("evaluated f point by point" in note and "could not run f on many points" in note
               and "TypeError: float() argument" in note and "python_branch.py:7" in note
               for note in notes(report))


def test_a_jacobian_over_the_budget_switches_auto_to_fast_mode() -> None:
    module = fixture_module("dense_layer")
    report = gradcheck.check(module.f, *module.f_inputs, max_memory=1 << 20)
    kinds = {c.check for c in report.checks}
    assert "fast" in kinds and "jacobian" not in kinds
    assert report.ok
    assert any("--mode auto chose it" in n and "--max-memory 1.0MiB" in n for n in notes(report))


def test_full_mode_under_a_small_budget_chunks_and_stays_exact() -> None:
    module = fixture_module("dense_layer")
    (x,) = module.f_inputs
    report = gradcheck.check(module.f, x, mode="full", max_memory=1 << 20,
                             kinds=frozenset({"jacobian"}))
    (jacobian,) = [c for c in report.checks if c.check == "jacobian"]
    assert jacobian.status == "pass"
    assert jacobian.max_abs_err is not None and jacobian.max_abs_err < 1e-6


def test_chunked_autodiff_jacobian_equals_the_whole_one() -> None:
    program = _program("dense_layer")
    recording = record(program)
    slot = program.sources[0]
    whole, _ = recording.jacobian(0, slot)
    chunked, error = recording.jacobian(0, slot, max_memory=8 * 301 * 16 * 100)
    assert error is None and whole is not None and chunked is not None
    np.testing.assert_array_equal(chunked, whole)
    analytic = fixture_module("dense_layer").jacobian(np.asarray(slot.value))
    np.testing.assert_allclose(chunked, analytic, rtol=1e-12, atol=1e-12)


def _dense_layer_at_its_point() -> tuple[Program, list[np.ndarray], np.ndarray, np.ndarray]:
    """The dense-layer fixture recorded: its program, f at the point, the point, the steps."""
    program = _program("dense_layer")
    recording = record(program)
    x = np.asarray(program.sources[0].value)
    return (program, [np.asarray(recording.outputs[0].tensor)], x,
            differences.step_sizes(x, "float64"))


def test_chunked_evaluations_equal_one_batch() -> None:
    program, centre, x, h = _dense_layer_at_its_point()
    small = BatchEvaluator(program, 0, [0], centre, max_memory=1 << 20)
    large = BatchEvaluator(program, 0, [0], centre, max_memory=1 << 30)
    assert small.chunk_size() < 2 * x.size <= large.chunk_size()
    calls: list[tuple[int, int]] = []
    (chunked,) = small.evaluate_perturbations(h, differences.FIRST_FACTORS,
                                              progress=lambda d, t: calls.append((d, t)))
    (whole,) = large.evaluate_perturbations(h, differences.FIRST_FACTORS)
    assert len(calls) > 1 and calls[-1] == (x.size, x.size)
    np.testing.assert_allclose(chunked, whole, rtol=1e-13, atol=1e-13)


def test_refining_every_element_reproduces_the_full_richardson_table() -> None:
    x = np.array([0.3, -1.2, 2.0])
    h = differences.step_sizes(x, "float64")

    def f(points: np.ndarray) -> np.ndarray:
        return np.stack([np.sin(points) * np.sum(points**2, axis=-1, keepdims=True)])[0]

    centre = f(x[None])[0]
    full = differences.finite_difference(f(differences.perturbed_points(x, h, 0, 3)), centre, h,
                                      "float64")
    elements = np.arange(3)
    first = f(differences.points_along(x, h, elements, differences.FIRST_FACTORS))
    second = f(differences.points_along(x, h, elements, differences.SECOND_FACTORS))
    cheap = differences.central_difference(first, centre, h, "float64")
    refined = differences.refine(cheap, first, second, centre, h, elements, "float64")
    np.testing.assert_array_equal(refined.jacobian, full.jacobian)
    np.testing.assert_array_equal(refined.error_estimate, full.error_estimate)
    assert not np.array_equal(cheap.jacobian, full.jacobian)


def test_only_columns_that_disagree_are_in_doubt() -> None:
    x = np.array([0.3, -1.2, 2.0])
    h = differences.step_sizes(x, "float64")
    first = np.sin(differences.points_along(x, h, np.arange(3), differences.FIRST_FACTORS))
    cheap = differences.central_difference(first, np.sin(x), h, "float64")
    exact = np.diag(np.cos(x))
    tolerance = tolerances.tolerance_for("float64")
    assert judging.in_doubt(exact, cheap, tolerance, 3).tolist() == []
    wrong = exact.copy()
    wrong[0, 2] = 0.5
    assert judging.in_doubt(wrong, cheap, tolerance, 3).tolist() == [2]


def test_a_wrong_gradient_gets_the_extrapolated_verdict() -> None:
    module = fixture_module("custom_gradient_wrong_values")
    report = gradcheck.check(module.softplus, *module.softplus_inputs, mode="full",
                             kinds=frozenset({"jacobian"}))
    (jacobian,) = [c for c in report.checks if c.check == "jacobian"]
    assert jacobian.status == "fail"
    # The error estimate comes from Richardson (x±2h), not from rounding alone.
    assert details(jacobian)["fd_error_estimate"] > 1e-12


def test_the_vectorised_function_is_traced_once_for_every_chunk_and_step() -> None:
    program, centre, x, h = _dense_layer_at_its_point()
    evaluator = BatchEvaluator(program, 0, [0], centre, max_memory=1 << 20)
    assert evaluator.chunk_size() < 2 * x.size
    evaluator.evaluate_perturbations(h, differences.FIRST_FACTORS)
    evaluator.evaluate_perturbations(h, differences.SECOND_FACTORS, elements=np.arange(7))
    evaluator.evaluate_perturbations(h / 4, differences.STEP_FACTORS, elements=np.arange(3))
    assert evaluator.strategy == "vectorised"
    assert evaluator.vectorised.experimental_get_tracing_count() == 1


def test_a_few_points_are_evaluated_by_calls_of_f_without_tracing() -> None:
    program = _program("python_branch")
    recording = record(program)
    centre = [np.asarray(recording.outputs[0].tensor)]
    x = np.asarray(program.sources[0].value)
    h = differences.step_sizes(x, "float64")
    evaluator = BatchEvaluator(program, 0, [0], centre, max_memory=1 << 30)
    (few,) = evaluator.evaluate_perturbations(h, differences.FIRST_FACTORS)
    assert evaluator.few_elements and evaluator.concrete is None
    assert evaluator.fallback_reason is None
    points = differences.points_along(x, h, np.arange(x.size), differences.FIRST_FACTORS)
    called = np.stack([np.asarray(program.function(tf.constant(p))) for p in points])
    np.testing.assert_array_equal(few, called)


def test_repeated_checks_do_not_make_tensorflow_warn_about_retracing(caplog) -> None:
    dense_layer = fixture_module("dense_layer")
    with caplog.at_level("WARNING"):
        for n in range(20, 27):
            f, _, x = dense_layer.make(n, seed=n)
            report = gradcheck.check(f, x, kinds=frozenset({"jacobian", "vjp"}))
            assert report.ok
    assert not [r for r in caplog.records if "retracing" in r.getMessage()]


def test_a_few_jacobian_rows_by_backward_passes_equal_the_analytic_jacobian() -> None:
    f, analytic, x = fixture_module("dense_layer").make(5)
    named = name_arguments(f, Arguments((x,), {}, "test"))
    program = prepare(f, named, "auto").program
    recording = record(program)
    block, error = recording.jacobian(0, program.sources[0])
    assert error is None and block is not None
    np.testing.assert_allclose(block, analytic(x), rtol=1e-12, atol=1e-12)


def _variable_program(function: Any) -> tuple[Program, list[np.ndarray], np.ndarray]:
    weights = tf.Variable(np.linspace(-1.0, 1.0, 12).reshape(3, 4))
    named = name_arguments(function, Arguments((weights,), {}, "test"))
    program = prepare(function, named, "float64").program
    centre = [np.asarray(record(program).outputs[0].tensor)]
    return program, centre, np.asarray(weights.numpy())


def _traced_always(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch, "TRACING_PAYS_SECONDS", 0.0)
    monkeypatch.setattr(batch, "TRACED_CALL_MIN_SECONDS", 0.0)
    monkeypatch.setattr(batch, "TRACED_MIN_POINTS", 1)


def _softplus_layer(w: tf.Variable) -> tf.Tensor:
    return tf.reduce_sum(tf.nn.softplus(tf.ones((2, 3), w.dtype) @ w), axis=0)


def _through_numpy(w: tf.Variable) -> tf.Tensor:
    return tf.constant(np.tanh(w.numpy()).sum(axis=0))


@pytest.mark.parametrize("function, traced", [(_softplus_layer, True), (_through_numpy, False)])
def test_a_weights_points_left_go_through_one_trace_when_f_can_be_traced(
        monkeypatch: pytest.MonkeyPatch, function: Any, traced: bool) -> None:
    """Slow eager calls (a Keras model's) are replaced by calls of f traced once, with the
    weight assigned inside the trace; f that cannot be traced stays eager. Either way the
    values are f's at every point and the weight keeps its value."""
    program, centre, w = _variable_program(function)
    _traced_always(monkeypatch)
    evaluator = BatchEvaluator(program, 0, [0], centre, max_memory=1 << 30)
    h = differences.step_sizes(w, "float64")
    (values,) = evaluator.evaluate_perturbations(h, differences.FIRST_FACTORS)
    assert evaluator.traced_point is not None  # tried
    assert (evaluator.traced_point is not False) is traced
    points = differences.points_along(w, h, np.arange(w.size), differences.FIRST_FACTORS)
    expected = np.stack([np.asarray(function(tf.Variable(p))) for p in points])
    np.testing.assert_allclose(values, expected, rtol=1e-13, atol=0)
    np.testing.assert_array_equal(program.slots[0].value.numpy(), w)


def test_once_traced_a_few_more_points_go_through_the_trace_too(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Doubtful elements retried at smaller steps are a few points at a time: once f is
    traced (and checked against eager f), they go through that trace, not a slow eager call
    each."""
    program, centre, w = _variable_program(_softplus_layer)
    _traced_always(monkeypatch)
    evaluator = BatchEvaluator(program, 0, [0], centre, max_memory=1 << 30)
    h = differences.step_sizes(w, "float64")
    evaluator.evaluate_perturbations(h, differences.FIRST_FACTORS)
    assert evaluator.traced_point
    monkeypatch.setattr(batch, "TRACED_MIN_POINTS", 10**6)  # too few points to trace anew
    eager: list[np.ndarray] = []
    evaluate_point = evaluator._evaluate_point
    monkeypatch.setattr(evaluator, "_evaluate_point",
                        lambda slot, point: eager.append(point) or evaluate_point(slot, point))
    (values,) = evaluator.evaluate_perturbations(h / 8, differences.FIRST_FACTORS,
                                                 elements=np.array([5]))
    assert not eager
    points = differences.points_along(w, h / 8, np.array([5]), differences.FIRST_FACTORS)
    expected = np.stack([np.asarray(_softplus_layer(tf.Variable(p))) for p in points])
    np.testing.assert_allclose(values, expected, rtol=1e-13, atol=0)


def _two_weights(w: tf.Variable, b: tf.Variable) -> tf.Tensor:
    return tf.reduce_sum(tf.nn.softplus(tf.ones((2, 3), w.dtype) @ w + b), axis=0)


def test_every_input_s_points_go_through_one_trace_of_f(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """A Keras model's weights are its inputs: f is traced once for all of them (each moved
    in turn, the others where they are), and the trace goes with the program."""
    w = tf.Variable(np.linspace(-1.0, 1.0, 12).reshape(3, 4))
    b = tf.Variable(np.linspace(0.5, -0.5, 4))
    named = name_arguments(_two_weights, Arguments((w, b), {}, "test"))
    program = prepare(_two_weights, named, "float64").program
    centre = [np.asarray(record(program).outputs[0].tensor)]
    _traced_always(monkeypatch)
    traces = []
    for index, value in enumerate((w.numpy(), b.numpy())):
        evaluator = BatchEvaluator(program, index, [0], centre, max_memory=1 << 30)
        h = differences.step_sizes(value, "float64")
        (values,) = evaluator.evaluate_perturbations(h, differences.FIRST_FACTORS)
        traces.append(evaluator.traced_point)
        points = differences.points_along(value, h, np.arange(value.size),
                                          differences.FIRST_FACTORS)
        moved = [(tf.Variable(p), b) if index == 0 else (w, tf.Variable(p)) for p in points]
        expected = np.stack([np.asarray(_two_weights(*pair)) for pair in moved])
        np.testing.assert_allclose(values, expected, rtol=1e-13, atol=0)
    assert traces[0] and traces[0] is traces[1]
    np.testing.assert_array_equal(program.slots[1].value.numpy(), b.numpy())
    gone = weakref.ref(program)
    del program, evaluator, named
    gc.collect()
    assert gone() is None
