"""Where the gradient path from an input is cut: a graph-break finding and its cause for each
place forensics/graph.py finds."""

from __future__ import annotations

from collections.abc import Sequence

from gradcheck.diagnosis.explained import attribute
from gradcheck.engine.program import Program
from gradcheck.evidence.causes import CutOp
from gradcheck.evidence.diagnosis import CutFound, CutNotFound
from gradcheck.evidence.gradients import NoGradient
from gradcheck.forensics.cut_ops import CutSite
from gradcheck.forensics.graph import locate_cuts
from gradcheck.report import Attribution, Cause, CheckResult, Kind, Mistake, Relation, Status

# Findings that a cut path explains when autodiff and finite differences disagree.
CUT_SYMPTOMS = frozenset({Kind.CONNECTED, Kind.JACOBIAN, Kind.VJP, Kind.FAST})


def cause_of(cut: CutSite, input_name: str) -> Cause:
    """What cuts the path from `input_name` at one cut."""
    return Cause(Mistake(cut.kind), location=cut.location,
                 facts=CutOp(input_name, cut.detail, cut.dtype))


def _failing_inputs(checks: Sequence[CheckResult], kinds: frozenset[Kind]) -> set[str]:
    return {c.input for c in checks if c.check in kinds and c.failed and c.input}


def _cut_findings(program: Program, index: int, lost: bool,
                  status: Status = Status.FAIL, no_gradient: bool = False) -> list[CheckResult]:
    slot = program.slots[index]
    cuts, note = locate_cuts(program, index, no_gradient, none=lost)
    if not cuts and not lost:
        return []  # values are wrong but the path is there: nothing to locate
    if not cuts:
        return [CheckResult(Kind.GRAPH_BREAK, Status.WARN, evidence=CutNotFound(note or None),
                            input=slot.name)]
    found = []
    for cut in _named_at_each_line(cuts):
        cause = cause_of(cut, slot.name)
        found.append(CheckResult(Kind.GRAPH_BREAK, status, evidence=CutFound(),
                                 input=slot.name, location=cut.location, cause=cause))
    return found


# Cuts that an op named for what it does (ArgMax, Round, an integer cast) often makes with
# helpers of its own at the same line (keras.ops.argmax's Equal and Bitcast): left out there.
_HELPER_KINDS = frozenset({Mistake.COMPARISON.value, Mistake.INTEGER_OUTPUT.value})


def _named_at_each_line(cuts: Sequence[CutSite]) -> list[CutSite]:
    """The cuts, without a comparison's or an integer output's where a named cut shares its
    line (one user call, one finding)."""
    named = {cut.location for cut in cuts if cut.kind not in _HELPER_KINDS} - {None}
    return [cut for cut in cuts if cut.kind not in _HELPER_KINDS or cut.location not in named]


def _no_gradient_sources(program: Program, checks: Sequence[CheckResult]) -> set[str]:
    """Sources that get no gradient from any output while finite differences see no slope
    either (autodiff None everywhere, `connected` passing or warning)."""
    connected: dict[str, list[CheckResult]] = {}
    for c in checks:
        if c.check == Kind.CONNECTED and c.input:
            connected.setdefault(c.input, []).append(c)
    return {name for name, results in connected.items()
            if all(isinstance(r.evidence, NoGradient) and not r.failed for r in results)}


def _gets_gradient(checks: Sequence[CheckResult]) -> set[str]:
    return {c.input for c in checks if c.check == Kind.CONNECTED and c.input
            and not c.failed and not isinstance(c.evidence, NoGradient)}


def _no_gradient_findings(program: Program, index: int, status: Status,
                          only_source: bool) -> list[CheckResult]:
    """Where a source that gets no gradient at all loses it; nothing when f never reads it.
    A failed trace (.numpy(), NumPy) names f, not this input, unless it is f's only source."""
    found = [c for c in _cut_findings(program, index, False, status, no_gradient=True)
             if c.cause is not None]
    traced = {"numpy", "numpy-method", "keras-predict", "python-number"}
    return [c for c in found if only_source or c.cause is None or c.cause.mistake not in traced]


def _annotate(checks: list[CheckResult], name: str, kinds: frozenset[Kind],
              first: Cause, passing: bool = False) -> list[CheckResult]:
    return [
        attribute(c, Attribution(Relation.CUT_PATH, first),
                  location=c.location or first.location, cause=first)
        if c.input == name and c.check in kinds and (c.failed or passing) else c
        for c in checks]


def graph_break_results(program: Program, checks: Sequence[CheckResult],
                        explained: set[str]) -> tuple[list[CheckResult], list[CheckResult]]:
    """Cuts for inputs whose gradient is missing or wrong; the checks, annotated with them."""
    suspects = _failing_inputs(checks, CUT_SYMPTOMS) - explained
    lost = _failing_inputs(checks, frozenset({Kind.CONNECTED}))
    # Sources that get no gradient at all, where finite differences see no slope either (a
    # count, an index, a threshold): where does an op give none? A failure when no source of
    # f gets a gradient (what makes Keras raise 'No gradients provided'), else a warning.
    idle = _no_gradient_sources(program, checks) - explained
    differentiable = [s for s in program.slots if s.differentiable]
    # When f reads trainable weights, they are what trains: no gradient to any of them is
    # Keras' error, whatever the data arguments get.
    weights = {s.name for s in program.slots if not s.argument}
    trained = _gets_gradient(checks) & weights if weights else _gets_gradient(checks)
    if weights and not trained:  # fast mode judges the weights together, in projections
        trained = weights - idle - suspects - lost
    status = Status.WARN if trained else Status.FAIL
    found: list[CheckResult] = []
    annotated = list(checks)
    # tf.py_function without a gradient: TensorFlow returns a scalar 0, a wrong shape.
    shapeless = _failing_inputs(checks, frozenset({Kind.GRAD_SHAPE})) - explained
    for index, slot in enumerate(program.slots):
        if slot.name in shapeless:
            cuts = [c for c in _cut_findings(program, index, True, Status.FAIL)
                    if c.cause is not None and c.cause.mistake == "python-function"]
            found += cuts
            if cuts and cuts[0].cause is not None:
                annotated = _annotate(annotated, slot.name, frozenset({Kind.GRAD_SHAPE}),
                                      cuts[0].cause)
        if slot.name in idle - suspects:
            cuts = _no_gradient_findings(program, index, status, len(differentiable) == 1)
            found += cuts
            if cuts and cuts[0].cause is not None:
                annotated = _annotate(annotated, slot.name, frozenset({Kind.CONNECTED}),
                                      cuts[0].cause, passing=True)
            continue
        if slot.name not in suspects:
            continue
        cuts = _cut_findings(program, index, slot.name in lost)
        found += cuts
        first = next((c.cause for c in cuts if c.cause is not None), None)
        if first is not None:
            annotated = _annotate(annotated, slot.name, CUT_SYMPTOMS, first)
    return found, annotated


def integer_output_cuts(program: Program) -> list[CheckResult]:
    """Where each differentiable source's path to f's integer outputs loses its gradient (the
    op of tf.argsort, tf.argmax, a cast): f returns nothing a gradient could reach."""
    found: list[CheckResult] = []
    for index, slot in enumerate(program.slots):
        if slot.differentiable:
            found += [c for c in _cut_findings(program, index, True, no_gradient=True)
                      if c.cause is not None]
    return found
