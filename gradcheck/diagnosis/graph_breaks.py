"""Where the gradient path from an input is cut, in words: the cause and the fix for each
place tf/graph.py finds."""

from __future__ import annotations

from collections.abc import Sequence

from gradcheck.diagnosis.explained import attribute
from gradcheck.evidence.diagnosis import CutFound, CutNotFound
from gradcheck.evidence.gradients import NoGradient
from gradcheck.report import Attribution, Cause, CheckResult, Kind, Mistake, Relation, Status
from gradcheck.tf.graph import CutSite, locate_cuts
from gradcheck.tf.program import Program

# What people do where an op gives no gradient (a hard count, index or threshold).
RELAX = ("for a gradient, use a smooth relaxation (a sigmoid- or softmax-weighted count, a soft"
         " rank or soft argmax, probabilities instead of hard hits), or a straight-through"
         " tf.custom_gradient (identity backward) declared with --surrogate NAME")
# TensorFlow op types as the user wrote them.
OP_NAMES = {"TopKV2": "tf.math.top_k / tf.argsort indices", "ArgMax": "tf.argmax",
            "ArgMin": "tf.argmin", "Round": "tf.round", "Floor": "tf.floor",
            "Ceil": "tf.math.ceil", "Sign": "tf.sign", "Equal": "tf.equal, ==",
            "NotEqual": "tf.not_equal, count_nonzero", "Greater": ">", "GreaterEqual": ">=",
            "Less": "<", "LessEqual": "<="}
# Findings that a cut path explains when autodiff and finite differences disagree.
CUT_SYMPTOMS = frozenset({Kind.CONNECTED, Kind.JACOBIAN, Kind.VJP, Kind.FAST})


def cause_of(cut: CutSite, input_name: str) -> Cause:
    """The words for one cut: what cuts the path from `input_name`, and what to do."""
    op = cut.detail.split(":")[0]
    alias = f" ({OP_NAMES[op]})" if op in OP_NAMES else ""
    words = {
        "variable": (f"tf.Variable created from {input_name} copies its values and cuts the"
                     " gradient path",
                     "use the tensor itself (tf.stack / tf.identity), not a new tf.Variable"),
        "numpy-method": (f".numpy() copies the value of a tensor computed from {input_name}"
                         " out of TensorFlow, so nothing computed from it has a gradient",
                         "keep the computation in TensorFlow ops"),
        "numpy": (f"a NumPy operation (np.*, np.asarray, float()) on a tensor computed from"
                  f" {input_name} leaves TensorFlow, so the result has no gradient",
                  "use the tf.* equivalent"),
        "python-number": (f"float()/int() turns a tensor computed from {input_name} into a"
                          " Python number, which has no gradient",
                          "keep it a tensor (tf.cast to a float dtype if needed)"),
        "stop-gradient": (f"tf.stop_gradient blocks the gradient from {input_name} on this path",
                          "remove it if the gradient should flow"),
        "integer-cast": (f"a cast to {cut.detail} on the path from {input_name}: integers carry"
                         " no gradient", "keep the value in a floating dtype (a deliberate"
                         " quantisation: a straight-through tf.custom_gradient, declared with"
                         " --surrogate NAME)"),
        "numpy-function": (f"tf.numpy_function on the path from {input_name} has no gradient",
                           "use TensorFlow ops, or tf.py_function with a tf.custom_gradient"),
        "piecewise-constant": (f"{op} on the path from {input_name} is piecewise"
                               f" constant{alias}: its gradient is zero or None", RELAX),
        "comparison": (f"{op} on the path from {input_name} compares values{alias}: its"
                       " boolean result is piecewise constant and has no gradient", RELAX),
        "integer-output": (f"{op} on the path from {input_name}{alias} returns"
                           f" {cut.detail.split(':')[-1]} values (indices or counts), which are"
                           " piecewise constant and carry no gradient", RELAX),
        "python-function": (f"tf.py_function on the path from {input_name} returns no gradient"
                            " (its Python function computes the result outside the tape, e.g."
                            " with NumPy; TensorFlow then gives a scalar 0 or None)",
                            "compute it with TensorFlow ops inside the function,"
                            " or give it a tf.custom_gradient"),
        "no-gradient": (f"{cut.detail} on the path from {input_name} has no registered gradient",
                        "register one with tf.RegisterGradient or wrap it in tf.custom_gradient"),
        "not-differentiable": (f"{cut.detail} on the path from {input_name} is marked not"
                               " differentiable", "use a differentiable op"),
        "assign": (f"a value computed from {input_name} is assigned into a tf.Variable and read"
                   " back: the read has no gradient to it",
                   "use the tensor itself instead of a variable round trip"),
    }
    what, fix = words[cut.kind]
    return Cause(Mistake(cut.kind), what, location=cut.location, fix=fix)


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
    for cut in cuts:
        cause = cause_of(cut, slot.name)
        found.append(CheckResult(Kind.GRAPH_BREAK, status, evidence=CutFound(),
                                 input=slot.name, location=cut.location, cause=cause))
    return found


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
    traced = {"numpy", "numpy-method", "python-number"}
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
