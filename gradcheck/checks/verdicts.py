"""The failing and warning verdicts that the Jacobian and VJP checks share."""

from __future__ import annotations

from typing import Any

import numpy as np

from gradcheck.numerics import symmetric
from gradcheck.numerics.judging import Comparison
from gradcheck.report import Cause, CheckResult, Kind, Status, format_index


def comparison_fields(comparison: Comparison) -> dict[str, Any]:
    return {"max_abs_err": comparison.max_abs_err, "max_rel_err": comparison.max_rel_err,
            "worst_index": comparison.worst_index, "excess": comparison.excess}


def mismatch(check: Kind, lead: str, actual: tuple[str, np.ndarray],
             expected: tuple[str, np.ndarray], comparison: Comparison,
             verdict: symmetric.SymmetricVerdict | None, details: dict[str, Any],
             where: dict[str, Any], cause: Cause | None = None) -> CheckResult:
    """A failure naming how many elements disagree and the worst one."""
    index = comparison.worst_index or ()
    return CheckResult(
        check, Status.FAIL,
        f"{lead} in {comparison.n_bad} of {comparison.size} elements; worst"
        f" {format_index(index)}: {actual[0]} {np.asarray(actual[1])[index]:.6g},"
        f" {expected[0]} {np.asarray(expected[1])[index]:.6g}"
        f" ({comparison.excess:.3g}× the allowed error)"
        + (symmetric.mismatch_note(verdict) if verdict else ""),
        details=details, cause=cause, **comparison_fields(comparison), **where)


def symmetric_warning(check: Kind, what: str, input_name: str, elementwise: Comparison,
                      verdict: symmetric.SymmetricVerdict | None, details: dict[str, Any],
                      where: dict[str, Any]) -> CheckResult | None:
    """A failure that is TensorFlow's symmetric-matrix convention becomes a warning."""
    if verdict is None or not verdict.convention:
        return None
    found = verdict.comparison
    details = {**details, "symmetric_perturbations": {
        "directions": verdict.directions.count, "max_abs_err": found.max_abs_err,
        "max_rel_err": found.max_rel_err, "elementwise_max_abs_err": elementwise.max_abs_err,
        "elementwise_max_rel_err": elementwise.max_rel_err,
        "elementwise_mismatches": elementwise.n_bad}}
    return CheckResult(check, Status.WARN,
                       symmetric.convention_message(what, input_name, elementwise, verdict),
                       details=details, max_abs_err=found.max_abs_err,
                       max_rel_err=found.max_rel_err, excess=found.excess,
                       worst_index=verdict.worst_index, **where)
