"""Where the gradient path from an input is cut, in words: the cause and the fix for each
place tf/graph.py finds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gradcheck.report import Cause, CheckResult, Kind, Status
from gradcheck.tf.graph import CutSite, locate_cuts
from gradcheck.tf.program import Program

USUAL_CAUSES = (
    "tf.Variable(...) built from inputs, .numpy()/float()/NumPy ops on tensors,"
    " tf.stop_gradient, casts to integer types, round/floor/ceil/argmax, tf.numpy_function,"
    " ops without a registered gradient"
)
# Findings that a cut path explains when autodiff and finite differences disagree.
CUT_SYMPTOMS = frozenset({Kind.CONNECTED, Kind.JACOBIAN, Kind.VJP, Kind.FAST})


def cause_of(cut: CutSite, input_name: str) -> Cause:
    """The words for one cut: what cuts the path from `input_name`, and what to do."""
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
                         " no gradient", "keep the value in a floating dtype"),
        "numpy-function": (f"tf.numpy_function on the path from {input_name} has no gradient",
                           "use TensorFlow ops, or tf.py_function with a tf.custom_gradient"),
        "piecewise-constant": (f"{cut.detail} on the path from {input_name} is piecewise"
                               " constant: its gradient is zero or None",
                               "use a smooth surrogate if a gradient is wanted here"),
        "no-gradient": (f"{cut.detail} on the path from {input_name} has no registered gradient",
                        "register one with tf.RegisterGradient or wrap it in tf.custom_gradient"),
        "not-differentiable": (f"{cut.detail} on the path from {input_name} is marked not"
                               " differentiable", "use a differentiable op"),
        "assign": (f"a value computed from {input_name} is assigned into a tf.Variable and read"
                   " back: the read has no gradient to it",
                   "use the tensor itself instead of a variable round trip"),
    }
    what, fix = words[cut.kind]
    return Cause(cut.kind, what, location=cut.location, fix=fix)


def _failing_inputs(checks: Sequence[CheckResult], kinds: frozenset[Kind]) -> set[str]:
    return {c.input for c in checks if c.check in kinds and c.failed and c.input}


def _cut_findings(program: Program, index: int, lost: bool,
                  status: Status = Status.FAIL) -> list[CheckResult]:
    slot = program.slots[index]
    cuts, note = locate_cuts(program, index)
    if not cuts and not lost:
        return []  # values are wrong but the path is there: nothing to locate
    if not cuts:
        why = f" ({note})" if note else ""
        return [CheckResult(Kind.GRAPH_BREAK, Status.WARN,
                            f"could not locate where the gradient path from {slot.name} is"
                            f" lost{why}; usual causes: {USUAL_CAUSES}", input=slot.name)]
    found = []
    for cut in cuts:
        cause = cause_of(cut, slot.name)
        found.append(CheckResult(Kind.GRAPH_BREAK, status, f"{cause.what}; {cause.fix}",
                                 input=slot.name, location=cut.location, cause=cause))
    return found


def graph_break_results(program: Program, checks: Sequence[CheckResult],
                        explained: set[str]) -> tuple[list[CheckResult], list[CheckResult]]:
    """Cuts for inputs whose gradient is missing or wrong; the checks, annotated with them."""
    suspects = _failing_inputs(checks, CUT_SYMPTOMS) - explained
    lost = _failing_inputs(checks, frozenset({Kind.CONNECTED}))
    # Weights that never train (no gradient, and no dependence at this point): where is
    # their path cut? A warning, like the finding it explains.
    idle = {c.input for c in checks if c.check == Kind.CONNECTED and c.status == Status.WARN
            and any(s.name == c.input and not s.argument for s in program.slots)}
    found: list[CheckResult] = []
    annotated = list(checks)
    for index, slot in enumerate(program.slots):
        if slot.name in idle - suspects:
            found += [c for c in _cut_findings(program, index, False, Status.WARN) if c.cause]
            continue
        if slot.name not in suspects:
            continue
        cuts = _cut_findings(program, index, slot.name in lost)
        found += cuts
        first = next((c.cause for c in cuts if c.cause is not None), None)
        if first is None:
            continue
        at = f" at {first.location}" if first.location else ""
        annotated = [
            replace(c, location=c.location or first.location,
                    message=f"{c.message}; likely cause: {first.what}{at}", cause=first)
            if c.input == slot.name and c.failed and c.check in CUT_SYMPTOMS else c
            for c in annotated]
    return found, annotated
