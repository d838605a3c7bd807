"""The real-world suite: gradcheck.check on functions nobody here wrote.

For every catalogue entry (tests/real_world_catalogue.py), in float64 and in float32 (float32
arguments, gradcheck's default dtype="auto"): the function as written must get no `fail` or
`error` and never make gradcheck raise, except for the library defects recorded in the
catalogue with their evidence, which must be reported exactly. On a representative subset,
the function wrapped in a tf.custom_gradient that returns its true VJP must pass as well, and
the same wrapper returning the VJP negated or zeroed must get a `fail`; one Jacobian element
bumped by 1e-4 of the block's largest entry must be caught in at least 95% (float64) and 90%
(float32) of the entries.

gradcheck runs once per (entry, mode, mutation), cached for the module, without the compiled
check where it would repeat other work (Runner's `lean`). The default run takes about five
minutes of CPU on two cores (most of it the 237 correct functions twice);
GRADCHECK_REAL_WORLD=full also runs the extended catalogue, every mutation of every entry,
and float32 checked in float32 (dtype="float32"), as `python benchmarks/accuracy.py --full`
does.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.real_world_catalogue import CATALOGUE, CORE, Case, by_name, mutant_subset
from tests.real_world_mutants import (
    MODES,
    Outcome,
    Runner,
    defect_failures,
    expected_defects,
    failing,
)

FULL = os.environ.get("GRADCHECK_REAL_WORLD", "") == "full"
CASES = CATALOGUE if FULL else CORE
MUTATED = CASES if FULL else mutant_subset()
USED_MODES = list(MODES) if FULL else ["float64", "float32"]
BUMP_TARGET = {"float64": 0.95, "float32": 0.90, "float32-strict": 0.90}


@pytest.fixture(scope="module")
def results() -> Runner:
    return Runner(lean=True)


def _params(cases: list[Case]) -> list[Any]:
    return [pytest.param(case, mode, id=f"{mode}-{case.name}")
            for mode in USED_MODES for case in cases if MODES[mode][0] in case.dtypes]


def _assert_correct(case: Case, outcome: Outcome) -> None:
    assert outcome.exception is None, outcome.describe()
    if case.defect:  # a genuine library defect: exactly those findings, nothing else
        assert defect_failures(outcome, case) == expected_defects(case, outcome), (
            f"{outcome.describe()}\nexpected only the known defect {case.defect}:"
            f" {case.evidence}")
    else:
        assert not failing(outcome), outcome.describe()


REQUIRED = (
    "tf.math.exp", "tf.math.log", "tf.math.sin", "tf.math.tanh", "tf.math.softplus",
    "tf.math.sigmoid", "tf.math.erf", "tf.math.lgamma", "tf.math.digamma", "tf.math.sqrt",
    "tf.math.rsqrt", "tf.math.atan", "tf.math.asinh", "tf.math.add", "tf.math.multiply",
    "tf.math.divide", "tf.math.pow", "tf.math.atan2", "tf.math.maximum",
    "tf.math.squared_difference", "tf.reduce_sum", "tf.reduce_mean", "tf.reduce_logsumexp",
    "tf.reduce_prod", "tf.reduce_max", "tf.norm", "tf.math.cumsum", "tf.math.cumprod",
    "tf.linalg.matmul", "tf.linalg.matvec", "tf.linalg.inv", "tf.linalg.det",
    "tf.linalg.slogdet", "tf.linalg.cholesky", "tf.linalg.cholesky_solve",
    "tf.linalg.eigh (eigenvalues)", "tf.linalg.eigvalsh", "tf.linalg.qr",
    "tf.linalg.svd (singular values)", "tf.linalg.triangular_solve", "tf.linalg.solve",
    "tf.linalg.logdet", "tf.linalg.expm", "tf.linalg.trace", "tf.math.l2_normalize",
    "tf.gather", "tf.gather_nd", "tf.math.segment_sum", "tf.math.unsorted_segment_sum",
    "tf.scatter_nd", "tf.tensor_scatter_nd_add", "tf.boolean_mask", "tf.where", "tf.reshape",
    "tf.transpose", "tf.concat", "tf.stack", "tf.tile", "tf.pad", "tf.reverse", "tf.roll",
    "slicing x[1:, ::2]", "tf.linalg.band_part", "tf.nn.softmax", "tf.nn.log_softmax",
    "tf.nn.conv1d", "tf.nn.conv2d", "tf.nn.max_pool2d", "tf.nn.avg_pool2d",
    "layer norm (tf.nn.moments composition)", "tf.nn.moments",
    "tf.nn.sparse_softmax_cross_entropy_with_logits",
    "tf.nn.softmax_cross_entropy_with_logits", "tf.cond", "tf.while_loop", "tf.scan",
    "tf.map_fn", "tf.foldl", "tf.function(jit_compile=False)", "tf.function (autograph loop)",
    "tf.py_function",
    "tfp.math.lbeta", "tfp.math.log_gamma_difference", "tfp.math.betainc",
    "tfp.math.igammainv", "tfp.math.log_bessel_ive", "tfp.math.lambertw", "tfp.math.erfcinv",
    "tfp.math.softplus_inverse", "tfp.math.log1mexp", "tfd.Normal.log_prob", "tfd.Normal.cdf",
    "tfd.Normal.log_cdf", "tfd.Gamma.log_prob", "tfd.Beta.log_prob", "tfd.StudentT.log_prob",
    "tfd.Poisson.log_prob (rate)", "tfd.Exponential.log_survival_function",
    "tfd.Weibull.log_prob", "tfd.VonMises.log_prob", "tfd.MultivariateNormalTriL.log_prob",
    "tfd.Dirichlet.log_prob", "tfd.Kumaraswamy.log_prob", "tfd.GeneralizedPareto.log_prob",
    "tfb.Softplus.forward", "tfb.Softplus.forward_log_det_jacobian",
    "tfb.Exp.inverse_log_det_jacobian",
    "tfb.Sigmoid.inverse", "tfb.Tanh.forward_log_det_jacobian", "tfb.FillScaleTriL.forward",
    "tfb.CholeskyOuterProduct.forward", "tfb.Chain([Shift, Scale]).forward",
    "tfb.SinhArcsinh.forward", "tfb.Reshape.forward",
    "gpflow.kernels.SquaredExponential.K(X, Z)", "gpflow.kernels.Matern32.K(X, Z)",
    "gpflow.kernels.Matern52.K(X, Z)", "gpflow.kernels.Periodic.K(X, Z)",
    "gpflow.optimizers.natgrad.meanvarsqrt_to_expectation",
)


def test_the_catalogue_covers_the_required_libraries_and_functions() -> None:
    names = [case.name for case in CORE]
    assert len(names) == len(set(names))
    assert sum(case.library == "tf" for case in CORE) >= 100
    assert sum(case.library == "tfp" for case in CORE) >= 30
    assert sum(case.library == "gpflow" for case in CORE) >= 3
    assert [name for name in REQUIRED if name not in names] == []
    for case in CATALOGUE:  # arguments at the point, in every dtype the entry runs in
        for dtype in case.dtypes:
            assert all(a.dtype.name == dtype for a in case.arguments(dtype)), case.name
    assert by_name("tf.math.atan2").f.__code__.co_varnames[:2] == ("y", "x")


@pytest.mark.parametrize(("case", "mode"), _params(CASES))
def test_a_correct_function_gets_no_false_alarm(results: Runner, case: Case, mode: str) -> None:
    outcome = results.get(case, mode, "plain")
    _assert_correct(case, outcome)


@pytest.mark.parametrize(("case", "mode"), _params(MUTATED))
def test_a_custom_gradient_returning_the_true_vjp_passes(results: Runner, case: Case,
                                                         mode: str) -> None:
    _assert_correct(case, results.get(case, mode, "correct"))


@pytest.mark.parametrize("kind", ["negated", "zeroed"])
@pytest.mark.parametrize(("case", "mode"), _params(MUTATED))
def test_a_negated_or_zeroed_vjp_fails(results: Runner, case: Case, mode: str,
                                       kind: str) -> None:
    outcome = results.get(case, mode, kind)
    assert outcome.exception is None, outcome.describe()
    assert any(status == "fail" for _, status, _, _ in outcome.findings), outcome.describe()


@pytest.mark.parametrize("mode", USED_MODES)
def test_one_element_bumped_by_1e_4_is_caught(results: Runner, mode: str) -> None:
    cases = [case for case in MUTATED if MODES[mode][0] in case.dtypes]
    outcomes = [results.get(case, mode, "bumped") for case in cases]
    assert [o.describe() for o in outcomes if o.exception is not None] == []
    missed = [o for o in outcomes if not o.failed]
    rate = 1.0 - len(missed) / len(outcomes)
    assert rate >= BUMP_TARGET[mode], (
        f"{mode}: {len(outcomes) - len(missed)}/{len(outcomes)} bumps caught ({rate:.0%});"
        f" missed: {[o.case for o in missed]}")
