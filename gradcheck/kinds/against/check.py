"""Saved models' findings: custom gradients lost in the save, and the `against` check (TARGET's
values and VJP against another TARGET's, such as a loaded model's against its original's)."""

from __future__ import annotations

from collections.abc import Sequence

from gradcheck.kinds.against.evidence import AgainstOriginal, UnsavedGradients
from gradcheck.kinds.against.judging import judge_against
from gradcheck.kinds.against.tf import VjpAt
from gradcheck.report import CheckResult, Kind, Status


def unsaved_gradients_result(functions: Sequence[str], op: str) -> CheckResult:
    """A custom-gradient failure: the saved model's gradient is missing."""
    return CheckResult(Kind.CUSTOM_GRADIENT, Status.FAIL,
                       evidence=UnsavedGradients(tuple(functions), op))


def against_result(found: VjpAt, original: VjpAt, label: str,
                   unsaved: Sequence[str] = ()) -> CheckResult:
    if found.missing_op is not None or original.missing_op is not None:
        state = "same" if found.missing_op == original.missing_op else "missing"
        return CheckResult(Kind.AGAINST, Status.PASS if state == "same" else Status.FAIL,
                           evidence=AgainstOriginal(state, label, unsaved=tuple(unsaved)))
    state, value_error, gradient_error, worst = judge_against(
        (found.values, original.values), (found.gradients, original.gradients), original.dtype)
    source = None if worst is None else original.names[worst]
    return CheckResult(Kind.AGAINST, Status.PASS if state == "same" else Status.FAIL,
                       input=source, max_rel_err=max(value_error, gradient_error),
                       evidence=AgainstOriginal(state, label, value_error, gradient_error,
                                                source, tuple(unsaved)))
