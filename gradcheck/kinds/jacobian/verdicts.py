"""The failing and warning verdicts that the Jacobian and VJP checks share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gradcheck.evidence import Evidence
from gradcheck.kinds.jacobian.evidence import Disagreement, SymmetricNote, SymmetricPerturbations
from gradcheck.numerics import symmetric
from gradcheck.numerics.judging import Comparison
from gradcheck.report import Cause, CheckResult, Kind, Status


def comparison_fields(comparison: Comparison) -> dict[str, Any]:
    return {"max_abs_err": comparison.max_abs_err, "max_rel_err": comparison.max_rel_err,
            "worst_index": comparison.worst_index, "excess": comparison.excess}


def _note(verdict: symmetric.SymmetricVerdict | None) -> SymmetricNote | None:
    if verdict is None:
        return None
    return SymmetricNote(verdict.comparison.ok, verdict.autodiff_symmetric, verdict.worst_index,
                         verdict.comparison.excess)


def disagreement(actual: np.ndarray, expected: np.ndarray, comparison: Comparison,
                 verdict: symmetric.SymmetricVerdict | None) -> Disagreement:
    """How many elements disagree, the worst one's two values, and the symmetric verdict."""
    index = comparison.worst_index or ()
    return Disagreement(comparison.n_bad, comparison.size, float(np.asarray(actual)[index]),
                        float(np.asarray(expected)[index]), _note(verdict))


def mismatch(check: Kind, evidence: Evidence, comparison: Comparison, where: dict[str, Any],
             cause: Cause | None = None) -> CheckResult:
    """A failure naming how many elements disagree and the worst one."""
    return CheckResult(check, Status.FAIL, evidence=evidence, cause=cause,
                       **comparison_fields(comparison), **where)


def symmetric_warning(check: Kind, evidence: Callable[[SymmetricPerturbations, int], Evidence],
                      elementwise: Comparison, verdict: symmetric.SymmetricVerdict | None,
                      where: dict[str, Any]) -> CheckResult | None:
    """A failure that is TensorFlow's symmetric-matrix convention becomes a warning;
    `evidence` builds the warning's evidence from the symmetric perturbations' numbers."""
    if verdict is None or not verdict.convention:
        return None
    found = verdict.comparison
    perturbations = SymmetricPerturbations(
        verdict.directions.count, found.max_abs_err, found.max_rel_err, elementwise.max_abs_err,
        elementwise.max_rel_err, elementwise.n_bad)
    return CheckResult(check, Status.WARN, evidence=evidence(perturbations, elementwise.size),
                       max_abs_err=found.max_abs_err, max_rel_err=found.max_rel_err,
                       excess=found.excess, worst_index=verdict.worst_index, **where)
