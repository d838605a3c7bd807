"""Failing comparisons whose cause is TensorFlow's own gradient of an op, wrong at f's values
(forensics/wrong_gradients.py), eagerly or under XLA only: the op's line in the user's code, and the
workaround."""

from __future__ import annotations

from collections.abc import Sequence

from gradcheck.diagnosis.explained import attribute
from gradcheck.engine.program import Program
from gradcheck.evidence.causes import TensorFlowGradientOp
from gradcheck.forensics.wrong_gradients import WrongTensorFlowGradient, wrong_tensorflow_gradients
from gradcheck.kinds.compiled.evidence import CompiledDiffers, CompiledNotFinite
from gradcheck.report import Attribution, Cause, CheckResult, Kind, Mistake, Relation

SYMPTOMS = frozenset({Kind.JACOBIAN, Kind.VJP, Kind.FAST, Kind.KINK, Kind.COMPILED, Kind.JVP,
                      Kind.GRAD_SHAPE})


def _unexplained(check: CheckResult) -> bool:
    """A failure that names no culprit and no line (at most what is wrong with the values)."""
    cause = check.cause
    return check.failed and check.check in SYMPTOMS and check.attributed_to is None and (
        cause is None or (cause.location is None and cause.culprit is None))


def _under_xla(check: CheckResult) -> bool:
    """The compiled check's XLA variant (jit_compile=True)."""
    evidence = check.evidence
    return isinstance(evidence, (CompiledDiffers, CompiledNotFinite)) and evidence.jit


def _cause(check: CheckResult, found: Sequence[WrongTensorFlowGradient]) -> Cause | None:
    """The first op whose gradient is wrong where the check ran (an XLA-only one: under XLA),
    in what the check sees (a wrong shape or wrong values)."""
    shape = check.check == Kind.GRAD_SHAPE
    first = next((w for w in found if w.reason.shape_only == shape
                  and (not w.reason.xla_only or _under_xla(check))), None)
    return None if first is None else Cause(
        Mistake.TENSORFLOW_GRADIENT, location=first.location,
        facts=TensorFlowGradientOp(first.op, first.reason))


def tensorflow_gradient_causes(program: Program, checks: Sequence[CheckResult]
                               ) -> list[CheckResult]:
    """The checks, with each unexplained failure of a source attributed to the first op on its
    path whose TensorFlow gradient is wrong at f's values where the check ran."""
    failing = {c.input for c in checks if c.input and _unexplained(c)}
    found = {slot.name: wrong for index, slot in enumerate(program.slots)
             if slot.name in failing and (wrong := wrong_tensorflow_gradients(program, index))}
    return [attribute(c, Attribution(Relation.TENSORFLOW_GRADIENT, cause),
                      location=c.location or cause.location, cause=cause)
            if _unexplained(c) and (cause := _cause(c, found.get(c.input or "", ()))) is not None
            else c for c in checks]
