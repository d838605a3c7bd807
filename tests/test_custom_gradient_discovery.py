"""Custom gradients are found however they were decorated or imported (observed when called,
not when defined), observing them changes nothing, and each is judged at its own site: with
random upstreams, on the arguments f differentiates, called with keywords."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import tensorflow as tf

import gradcheck
from gradcheck.engine.instrument import observing_custom_gradients
from gradcheck.report import CheckResult, Report

from .conftest import FIXTURES, fixture_module, notes

SPELLINGS = {
    # f: the line of the wrong grad_fn's return
    "compat_composed": "custom_gradient_spellings.py:17",
    "bound_composed": "custom_gradient_spellings.py:27",
    "library_composed": "cg_library.py:11",
    "in_tf_function": "custom_gradient_spellings.py:27",
    "method_composed": "custom_gradient_spellings.py:68",
}


def target(module: str, function: str) -> str:
    return f"{FIXTURES / (module + '.py')}:{function}"


def site_findings(report: Report) -> list[tuple[str, str, str | None, str | None]]:
    return sorted((c.check, c.status, c.input, str(c.location)) for c in report.checks
                  if c.check == "custom-gradient")


def failed(report: Report, check: str) -> list[CheckResult]:
    return [c for c in report.checks if c.check == check and c.failed]


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_every_spelling_is_found_from_the_function_object_as_from_its_target(name: str) -> None:
    module = fixture_module("custom_gradient_spellings")
    assert "cg_library" in sys.modules  # imported before any check: nothing to patch there
    by_object = gradcheck.check(getattr(module, name), *getattr(module, name + "_inputs"))
    by_target = gradcheck.check(target("custom_gradient_spellings", name))
    wrong = failed(by_object, "custom-gradient")
    assert len(wrong) == 1 and wrong[0].location is not None
    assert str(wrong[0].location).endswith(SPELLINGS[name])
    assert site_findings(by_object) == site_findings(by_target)
    assert [c.location for c in failed(by_object, "jacobian")] == [wrong[0].location]
    assert not any("path/to/module.py" in note for note in notes(by_object))


def test_assert_gradients_names_the_line_of_the_grad_fn() -> None:
    module = fixture_module("custom_gradient_spellings")
    with pytest.raises(AssertionError) as raised:
        gradcheck.assert_gradients(module.bound_composed, *module.bound_composed_inputs)
    assert "custom_gradient_spellings.py:27" in str(raised.value)


def test_a_custom_gradient_target_is_found_as_a_function_object() -> None:
    module = fixture_module("custom_gradient_mistakes")
    report = gradcheck.check(module.sign_flipped, *module.sign_flipped_inputs)
    wrong = failed(report, "custom-gradient")
    assert wrong and wrong[0].location is not None
    assert str(wrong[0].location).endswith("custom_gradient_mistakes.py:23")


def test_observation_is_only_in_force_during_a_check() -> None:
    from tensorflow.python.ops import custom_gradient as module

    eager, graph = module._eager_mode_decorator, module._graph_mode_decorator
    with observing_custom_gradients():
        assert module._eager_mode_decorator is not eager
    assert (module._eager_mode_decorator, module._graph_mode_decorator) == (eager, graph)
    gradcheck.check(fixture_module("custom_gradient_observation").method, [0.3])
    assert (module._eager_mode_decorator, module._graph_mode_decorator) == (eager, graph)


def _values_and_gradients(f: object, x: np.ndarray) -> list[np.ndarray]:
    value = tf.constant(x)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(value)
        y = f(value)  # type: ignore[operator]
    upstream = tf.constant(np.linspace(-1.0, 2.0, int(np.prod(y.shape))).reshape(y.shape))
    found = [np.asarray(y), np.asarray(tape.gradient(y, value, output_gradients=upstream))]
    variables = [v for v in tape.watched_variables() if v.trainable]
    found += [np.asarray(g) for g in tape.gradient(y, variables, output_gradients=upstream)]
    return found


@pytest.mark.parametrize("name", ["method", "staticmethod_", "closures", "nested",
                                  "variables", "keywords", "everything"])
def test_observing_changes_nothing_f_computes_or_returns(name: str) -> None:
    module = fixture_module("custom_gradient_observation")
    f, x = getattr(module, name), np.array(module.POINT)
    plain = _values_and_gradients(f, x)
    with observing_custom_gradients() as observer:
        observed = _values_and_gradients(f, x)
    assert observer.sites  # they were seen...
    assert len(plain) == len(observed)  # ...and nothing changed
    for before, after in zip(plain, observed):
        np.testing.assert_array_equal(before, after)
    report = gradcheck.check(f, module.POINT)
    assert report.ok, str(report)
    assert not failed(report, "custom-gradient")


def test_nested_custom_gradients_pass_at_second_order() -> None:
    module = fixture_module("custom_gradient_observation")
    report = gradcheck.check(module.nested, module.POINT, order=2)
    assert report.ok, str(report)


def run(function: str) -> Report:
    return gradcheck.check(target("custom_gradient_site_slots", function))


def test_a_grad_fn_ignoring_its_upstream_at_a_scalar_output_is_caught_at_its_site() -> None:
    module = fixture_module("custom_gradient_site_slots")
    for report in (run("ignores_upstream"),
                   gradcheck.check(module.ignores_upstream, *module.ignores_upstream_inputs)):
        wrong = failed(report, "custom-gradient")
        assert len(wrong) == 1 and wrong[0].cause is not None
        assert wrong[0].cause.mistake == "ignored-upstream"
        assert wrong[0].location is not None
        assert str(wrong[0].location).endswith("custom_gradient_site_slots.py:12")


def test_arguments_f_never_differentiates_are_not_judged_at_the_site() -> None:
    report = run("python_float_and_constant")
    assert report.ok, str(report)
    passes = [c for c in report.checks if c.check == "custom-gradient"]
    assert {c.status for c in passes} == {"pass"} and len(passes) == 2


def test_inside_tf_function_the_traced_call_says_what_f_differentiates() -> None:
    report = run("traced_python_float")
    assert report.ok, str(report)
    assert [c.status for c in report.checks if c.check == "custom-gradient"] == ["pass"]


def test_forward_mode_through_a_grad_fn_outside_tensorflow_is_a_skip_naming_it() -> None:
    report = run("grad_fn_leaves_tensorflow")
    assert report.ok, str(report)
    jvps = [c for c in report.checks if c.check == "jvp"]
    assert jvps and {c.status for c in jvps} == {"skip"}
    named = [c for c in jvps if c.location is not None]
    assert named and str(named[0].location).endswith("custom_gradient_site_slots.py:52")
    assert "numpy_sin" in named[0].message


def test_tensors_passed_by_keyword_are_located_at_the_call() -> None:
    bypassed = run("all_by_keyword")
    wrong = failed(bypassed, "custom-gradient")
    assert len(wrong) == 1 and wrong[0].cause is not None
    assert wrong[0].cause.mistake == "keywords"
    assert wrong[0].location is not None
    assert str(wrong[0].location).endswith("custom_gradient_site_slots.py:76")
    assert "grad_fn is never called" in wrong[0].message and "positionally" in wrong[0].message
    partly = run("one_by_keyword")
    keyword = [c for c in failed(partly, "custom-gradient") if c.cause and
               c.cause.mistake == "keywords"]
    assert len(keyword) == 1 and keyword[0].location is not None
    assert str(keyword[0].location).endswith("custom_gradient_site_slots.py:80")
    count = [c for c in failed(partly, "custom-gradient") if c.cause and
             c.cause.mistake == "count"]
    assert count and "not y passed by keyword" in count[0].message
    assert run("positional").ok


def test_keywords_are_found_from_the_function_object_too() -> None:
    module = fixture_module("custom_gradient_site_slots")
    report = gradcheck.check(module.all_by_keyword, *module.all_by_keyword_inputs)
    wrong = failed(report, "custom-gradient")
    assert len(wrong) == 1 and wrong[0].location is not None
    assert str(wrong[0].location).endswith("custom_gradient_site_slots.py:76")


def test_a_custom_gradient_of_an_installed_library_is_checked_when_f_fails() -> None:
    import tensorflow_probability as tfp

    def lambertw(x: tf.Tensor) -> tf.Tensor:
        return tfp.math.lambertw(x)

    quiet = gradcheck.check(lambertw, [0.3, 1.6])
    assert quiet.ok and not [c for c in quiet.checks if c.check == "custom-gradient"]
    module = fixture_module("custom_gradient_spellings")

    def composed(x: tf.Tensor) -> tf.Tensor:
        return tfp.math.lambertw(module.bound_cube(x))

    report = gradcheck.check(composed, [0.3, 0.9])
    sites = [c for c in report.checks if c.check == "custom-gradient"]
    assert any("bound_cube" in c.message and c.failed for c in sites)
    # TFP wraps every custom gradient of its own in one function (internal/custom_gradient.py)
    assert any(c.status == "pass" and "tensorflow_probability" in str(c.location)
               for c in sites)


def test_a_grad_fn_written_for_graph_mode_is_judged_in_graph_mode() -> None:
    """tf.gradients inside grad_fn raises only eagerly: called in f's tf.function, it is
    judged there, and its real mistake (the upstream is not used) is told at its line."""
    module = fixture_module("graph_mode_grad_fn")
    report = gradcheck.check(module.f_graph, np.array([0.5, 1.0, 2.0]))
    site = [c for c in report.checks if c.check == "custom-gradient" and c.failed]
    assert site and all("eager execution" not in c.message for c in site), report.checks
    assert site[0].cause is not None and site[0].cause.mistake in (
        "summed-upstream", "ignored-upstream")
    assert str(site[0].location).endswith("graph_mode_grad_fn.py:12")


def test_a_grad_fn_that_raises_in_fs_own_eager_use_is_told_once() -> None:
    """Called eagerly, tf.gradients inside grad_fn raises for the user too: one finding, at
    its line, not the site's and f's own alike."""
    module = fixture_module("graph_mode_grad_fn")
    report = gradcheck.check(lambda x: module.custom_op(x), np.array([0.5, 1.0, 2.0]))
    raised = [c for c in report.checks if c.failed and "eager execution" in c.message]
    assert [str(c.location).rsplit(":", 1)[1] for c in raised] == ["11"], report.checks
