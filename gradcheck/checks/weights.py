"""Layers that can never train because f never calls them (Keras: 'No gradients provided'), and
layers whose call creates a new tf.Variable each time (the variable trained is never read)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gradcheck.engine.program import function_name
from gradcheck.engine.recording import Recording
from gradcheck.evidence.causes import CreatedInCall, UnusedLayer
from gradcheck.evidence.gradients import UnbuiltLayer, VariableInCall
from gradcheck.report import Attribution, Cause, CheckResult, Kind, Mistake, Relation, Status

# The findings about a weight that a variable re-created on every call explains.
EXPLAINED = frozenset({Kind.JACOBIAN, Kind.VJP, Kind.JVP, Kind.FAST, Kind.CONNECTED,
                       Kind.COMPILED})


def unbuilt_layer_results(recording: Recording) -> list[CheckResult]:
    name = function_name(recording.program.function)
    return [CheckResult(Kind.CONNECTED, Status.WARN, evidence=UnbuiltLayer(name, layer),
                        input=layer, cause=Cause(Mistake.UNUSED_LAYER, facts=UnusedLayer(layer)))
            for layer in recording.unbuilt_layers]


def _created_names(recording: Recording) -> tuple[str, ...]:
    return tuple(dict.fromkeys(name.rsplit("/", 1)[-1] for name in recording.created_names))


def variable_in_call_cause(recording: Recording) -> Cause | None:
    """A Keras layer's call creating tf.Variables on every call, at that line (also why
    tf.function cannot trace f), else None."""
    at_work = recording.created_in_call
    if at_work is None:
        return None
    return Cause(Mistake.VARIABLE_IN_CALL, f"{at_work.layer_class}.call", recording.created_at,
                 CreatedInCall(at_work.layer_class, _created_names(recording), at_work.made))


def variable_in_call_results(recording: Recording, results: Sequence[CheckResult]
                             ) -> list[CheckResult]:
    """A warning at the line in a layer's call that creates a tf.Variable on every call, and
    the results, with the failures of a weight of that name (the first call's copy, which
    tf-keras tracks and no later call reads) explained by it; when call constructs a new layer,
    every failure (its new random weights make f another function on every call)."""
    at_work, cause = recording.created_in_call, variable_in_call_cause(recording)
    if at_work is None or cause is None:
        return list(results)
    layer_class, made = at_work.layer_class, at_work.made
    names = _created_names(recording)
    found = CheckResult(Kind.CONNECTED, Status.WARN, location=recording.created_at,
                        evidence=VariableInCall(at_work.layer, layer_class, names, made),
                        cause=cause)
    return [found] + [
        replace(r, attributed_to=Attribution(Relation.CREATED_IN_CALL, cause,
                                             earlier=r.attributed_to),
                location=r.location or recording.created_at)
        if r.failed and r.check in EXPLAINED and r.input is not None
        and (made is not None or r.input.rsplit("/", 1)[-1] in names) else r for r in results]
