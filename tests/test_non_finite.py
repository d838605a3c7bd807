"""The non-finite check (a NaN or an infinity at the op and line that made it, and why), the
other findings located at their op (nondeterminism, compiled skips, kinks), and the compiled
check kept in the user's dtype when float64 promotion would decide it."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from click.testing import Result

import gradcheck
from gradcheck.evidence import Location
from gradcheck.evidence.causes import Words
from gradcheck.evidence.non_finite import NonFiniteOrigin, NonFiniteSeen, NonFiniteUntraceable
from gradcheck.render.annotations import render_github_annotations
from gradcheck.render.json_format import check_dict
from gradcheck.render.junit import render_junit
from gradcheck.report import Cause, CheckOutcome, CheckResult, Mistake, Report

from .conftest import fixture_module, fixture_target, notes


def _non_finite(report: Report) -> list[CheckResult]:
    return [c for c in report.checks if c.check == "non-finite"]


def _kind(report: Report, kind: str) -> list[CheckResult]:
    return [c for c in report.checks if c.check == kind]


def _assert_found(report: Report, fixture: str, subject: str, mistake: str, culprit: str,
                  line: int) -> CheckResult:
    found = [c for c in _non_finite(report) if subject in (c.input, c.output)]
    assert found, [c.message for c in report.checks if c.failed]
    result = found[0]
    assert result.status == "fail" and not report.ok
    assert str(result.location).endswith(f"{fixture}.py:{line}")
    assert result.cause is not None and result.cause.mistake == mistake
    assert result.cause.culprit == culprit and result.cause.fix
    return result


@pytest.mark.parametrize(("function", "subject", "mistake", "culprit", "line"), [
    ("transfer", "x", "untaken-branch", "RealDiv", 8),
    ("exp_not_taken", "x", "untaken-branch", "Exp", 15),
    ("sqrt_scale", "c", "infinite-derivative", "Sqrt", 23),
    ("entropy", "y", "non-finite-value", "Log", 30),
    ("row_norms", "x", "infinite-derivative", "Sqrt (inside norm)", 37),
    ("square_overflow", "y", "non-finite-value", "Mul", 51),
])
def test_a_non_finite_gradient_or_value_is_named_at_the_op_that_made_it(
        function: str, subject: str, mistake: str, culprit: str, line: int) -> None:
    report = gradcheck.check(fixture_target("non_finite", function))
    result = _assert_found(report, "non_finite", subject, mistake, culprit, line)
    if mistake == "untaken-branch":
        assert "not taken" in result.message and "inner tf.where" in result.message


@pytest.mark.parametrize("function", ["entropy", "square_overflow"])
def test_a_non_finite_output_leaves_its_comparisons_without_a_verdict(function: str) -> None:
    """Where f's own value is NaN or inf, autodiff and finite differences are compared on
    non-finite numbers: one finding, the non-finite one, and no verdicts that repeat it."""
    report = gradcheck.check(fixture_target("non_finite", function))
    assert [c.check for c in report.checks if c.failed] == ["non-finite"]
    compared = _kind(report, "jacobian") + _kind(report, "vjp")
    assert compared and all(c.status == "skip" for c in compared)
    assert all("verdict: f's output y is" in c.message for c in compared)
    origin = _non_finite(report)[0].location
    assert origin is not None and all(c.location == origin for c in compared)


def test_a_gradient_that_overflows_at_a_product_is_told_apart_from_an_infinite_derivative(
        ) -> None:
    """Mul's local derivative is its other argument, finite: the backward pass's inf is the
    gradient coming back times it, beyond float32's range, and the fix is to scale values."""
    report = gradcheck.check(fixture_target("non_finite", "scaled_product"), dtype="float32")
    result = _assert_found(report, "non_finite", "y", "infinite-derivative", "Mul", 92)
    assert "overflows" in result.message and "its local derivative is finite" in result.message
    assert "scale the values" in result.message


def test_a_fused_gradient_kernel_s_sign_is_said_to_be_the_upstream_s() -> None:
    """SqrtGrad gives the upstream times 0.5 / sqrt(v): at v = 0 with an upstream of -1 that is
    -inf, while the local derivative itself is +inf."""
    report = gradcheck.check(fixture_target("non_finite", "margin_of_distances"))
    result = _assert_found(report, "non_finite", "a", "infinite-derivative", "Sqrt", 101)
    assert ("its local derivative at Sqrt(0) is infinite, so the gradient it passes back is"
            " -inf (SqrtGrad in the backward pass)") in result.message


def test_the_symptoms_are_located_at_the_op_too() -> None:
    report = gradcheck.check(fixture_target("non_finite", "transfer"))
    jacobian = _kind(report, "jacobian")[0]
    assert jacobian.status == "fail" and jacobian.location is not None
    assert str(jacobian.location).endswith("non_finite.py:8") and "non-finite" in jacobian.message


@pytest.mark.parametrize("function", ["entropy", "square_overflow"])
def test_a_deterministic_non_finite_value_is_never_nondeterminism_nor_nan_against_nan(
        function: str) -> None:
    report = gradcheck.check(fixture_target("non_finite", function))
    assert not _kind(report, "nondeterminism")
    assert all(c.status != "fail" for c in _kind(report, "jvp") + _kind(report, "compiled"))
    assert [c.output for c in _non_finite(report)] == ["y"]


def test_a_nan_only_xla_produces_is_analysed_on_that_variant() -> None:
    report = gradcheck.check(fixture_target("non_finite", "sqrt_where"))
    result = _assert_found(report, "non_finite", "x", "untaken-branch", "Sqrt", 44)
    assert result.message.startswith("under tf.function(jit_compile=True) only")
    assert [c.status for c in _kind(report, "compiled")] == ["pass", "fail"]


@pytest.mark.parametrize("function", ["guarded_transfer", "safe_sqrt_where",
                                      "stable_log_softmax", "xlogy_entropy"])
def test_correct_functions_of_the_same_families_pass(function: str) -> None:
    report = gradcheck.check(fixture_target("non_finite", function))
    assert report.ok, [c.message for c in report.checks if c.failed]
    assert not _non_finite(report)
    assert all(c.status == "pass" for c in _kind(report, "compiled"))


def test_a_function_object_gets_the_same_finding_and_line() -> None:
    module = fixture_module("non_finite")
    report = gradcheck.check(module.transfer, [1.0, -1.0])
    _assert_found(report, "non_finite", "x", "untaken-branch", "RealDiv", 8)


def test_the_finding_reaches_json_junit_and_annotations(run_cli: Callable[..., Result]
                                                        ) -> None:
    result = run_cli(["check", fixture_target("non_finite", "transfer"), "--format", "json"])
    assert result.exit_code == 1
    checks = json.loads(result.stdout)["checks"]
    finding = next(c for c in checks if c["check"] == "non-finite")
    assert finding["location"].endswith("non_finite.py:8")
    assert finding["cause"]["mistake"] == "untaken-branch" and finding["cause"]["fix"]
    report = gradcheck.check(fixture_target("non_finite", "transfer"))
    junit = render_junit([CheckOutcome("transfer", "transfer", report, report.exit_code)])
    assert 'name="non-finite"' in junit and "non_finite.py:8: the gradient for x" in junit
    assert "non_finite.py,line=8,title=gradcheck non-finite" in render_github_annotations(report)


# (function, dtype, subject, mistake, culprit, line): the real cases of fixtures/non_finite_real.
REAL_CASES = [
    ("transfer", "auto", "x", "untaken-branch", "RealDiv", 11),
    ("transfer", "float32", "x", "untaken-branch", "RealDiv", 11),
    ("select_exp", "auto", "x", "untaken-branch", "Exp", 20),
    ("select_exp", "float32", "x", "untaken-branch", "Exp", 20),
    ("log_fork", "auto", "alpha", "untaken-branch", "Log", 31),
    ("norm_square", "auto", "x", "infinite-derivative", "Sqrt (inside norm)", 40),
    ("norm_square", "float32", "x", "infinite-derivative", "Sqrt (inside norm)", 40),
    ("column_distance", "auto", "y2", "infinite-derivative", "Sqrt (inside norm)", 52),
    ("softmax_cross_entropy", "auto", "y", "non-finite-value", "Log", 65),
    ("sqrt_fork", "float32", "y", "untaken-branch", "Sqrt", 74),
]


@pytest.mark.parametrize(("function", "dtype", "subject", "mistake", "culprit", "line"),
                         REAL_CASES)
def test_real_questions_are_answered_at_the_askers_line(
        function: str, dtype: str, subject: str, mistake: str, culprit: str, line: int) -> None:
    report = gradcheck.check(fixture_target("non_finite_real", function), dtype=dtype)
    _assert_found(report, "non_finite_real", subject, mistake, culprit, line)


@pytest.mark.parametrize(("function", "line", "words"), [
    ("accumulates", 11, "a variable write, AssignAddVariableOp"),
    ("noisy", 19, "a random op, RandomStandardNormal"),
    ("sampled", 26, "a random op, RandomStandardNormal"),
])
def test_nondeterminism_is_located_at_the_stateful_op(function: str, line: int,
                                                      words: str) -> None:
    report = gradcheck.check(fixture_target("located_findings", function))
    result = _kind(report, "nondeterminism")[0]
    assert result.status == "fail" and words in result.message
    assert str(result.location).endswith(f"located_findings.py:{line}")


def test_layers_built_inside_f_are_named_as_what_changes() -> None:
    report = gradcheck.check(fixture_target("located_findings", "layers_built_inside"))
    result = _kind(report, "nondeterminism")[0]
    assert result.status == "fail" and "creates 4 variable(s) on every call" in result.message
    assert "create them once, outside f" in result.message and "stateless" not in result.message
    assert str(result.location).endswith("located_findings.py:69"), result.location


@pytest.mark.parametrize("dtype", ["auto", "float32"])
def test_a_function_that_a_tape_changes_is_told_apart_from_randomness(dtype: str) -> None:
    """TFP's Gamma sampler with a stateless seed: the same values on every call without a
    tape, others under one (TF #7474). Not 'fix the randomness': the tape is what changes f."""
    report = gradcheck.check(fixture_target("located_findings", "gamma_of_its_sample"),
                             dtype=dtype)
    result = _kind(report, "nondeterminism")[0]
    assert result.status == "fail" and not report.ok
    assert "returns other values under a GradientTape than without one" in result.message
    assert "stateless" not in result.message
    assert result.cause is not None and result.cause.mistake == "tape-dependent"


@pytest.mark.parametrize(("function", "culprit", "line"), [
    ("relu_at_zero", "Relu", 42), ("maximum_tie", "Maximum", 49)])
def test_a_kink_is_located_at_the_op_that_has_it(function: str, culprit: str,
                                                 line: int) -> None:
    report = gradcheck.check(fixture_target("located_findings", function))
    kinks = _kind(report, "kink")
    assert kinks and all(k.status == "warn" for k in kinks) and report.ok
    assert kinks[0].cause is not None and kinks[0].cause.culprit == culprit
    assert str(kinks[0].location).endswith(
        f"located_findings.py:{line}")


def test_an_op_xla_cannot_compile_is_located_at_its_line() -> None:
    report = gradcheck.check(fixture_target("located_findings", "matrix_exponential"),
                             dtype="float32")
    skip = [c for c in _kind(report, "compiled") if c.status == "skip"]
    assert skip and skip[0].location is not None
    assert str(skip[0].location).endswith("located_findings.py:34"), skip[0].location
    assert "matrix_exponential" in skip[0].message


@pytest.mark.parametrize(("function", "inputs"), [
    ("pow_literal", [[0.1, 0.2]]), ("where_literal", [[1.0, -1.0]]), ("resize", None)])
def test_the_compiled_check_runs_in_the_users_dtype_when_promotion_decides_it(
        function: str, inputs: list[list[float]] | None) -> None:
    module = fixture_module("compiled_dtype")
    args = inputs if inputs is not None else list(module.resize_inputs)
    report = gradcheck.check(getattr(module, function), *args)
    compiled = _kind(report, "compiled")
    assert [c.status for c in compiled] == ["pass", "pass"]
    assert any(n.startswith("the compiled check ran in float32, the arguments' own dtype")
               for n in notes(report))


def test_a_nan_only_forward_mode_gives_is_a_jvp_warning_not_a_failure() -> None:
    report = gradcheck.check(fixture_target("non_finite_real", "gamma_curve"))
    jvp = _kind(report, "jvp")
    assert [c.status for c in jvp] == ["warn"] and "forward mode" in jvp[0].message
    assert report.ok and not _non_finite(report)


def test_non_finite_sentences_from_hand_built_evidence() -> None:
    sqrt = NonFiniteOrigin("Sqrt", "SqrtGrad", Location("m.py", 3), True, "inf")
    located = CheckResult("non-finite", "fail", input="x", location=sqrt.location,
                          worst_index=(0,), evidence=NonFiniteSeen(
                              "tf.function", (sqrt,), "x", True, "inf", 1, 2, (0,)),
                          cause=Cause(Mistake.INFINITE_DERIVATIVE,
                                      facts=Words("the gradient of Sqrt", "add eps")))
    assert located.message == ("under tf.function only (eagerly it is finite), the gradient"
                               " for x is inf in 1 of 2 element(s) (first at [0]): the gradient"
                               " of Sqrt; fix: add eps")
    assert located.headline == located.message.removesuffix("; fix: add eps")
    assert check_dict(located)["details"] == {"variant": "tf.function", "origins": (
        {"op": "Sqrt", "kernel": "SqrtGrad", "location": "m.py:3", "backward": True,
         "produced": "inf"},)}
    unlocated = CheckResult("non-finite", "fail", output="y", evidence=NonFiniteSeen(
        "eager", (), "y", False, "NaN", 2, 2),
        cause=Cause(Mistake.NON_FINITE, facts=Words("no op found")))
    assert unlocated.message == "f's output y is NaN in 2 of 2 element(s); no op found"
    assert check_dict(unlocated)["details"] == {}
    untraceable = CheckResult("non-finite", "fail", evidence=NonFiniteUntraceable(),
                              cause=Cause(Mistake.NON_FINITE, facts=Words("not traceable")))
    assert untraceable.message.startswith("f or its gradient is NaN or infinite at this point")


def test_a_tfp_density_outside_its_support_names_the_value_not_the_op() -> None:
    """tensorflow/probability#884: log_prob's xlogy is NaN at -1 because -1 is outside Beta's
    support; the fix is the value (or validate_args=True), not a guard on xlogy."""
    module = fixture_module("tfp_outside_support")
    report = gradcheck.check(module.f, *module.f_inputs)
    found = next(c for c in report.checks if c.check == "non-finite")
    assert found.failed and str(found.location).endswith("tfp_outside_support.py:8")
    assert "Beta.log_prob at" in found.message and "outside Beta's support" in found.message
    assert "validate_args=True" in found.message
    assert "snapshot" not in found.message
    inside = gradcheck.check(module.inside, *module.inside_inputs)
    assert inside.ok and not any(c.check == "non-finite" for c in inside.checks)
