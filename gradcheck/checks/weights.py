"""Layers that can never train because f never calls them (Keras: 'No gradients provided')."""

from __future__ import annotations

from gradcheck.evidence.causes import UnusedLayer
from gradcheck.evidence.gradients import UnbuiltLayer
from gradcheck.report import Cause, CheckResult, Kind, Mistake, Status
from gradcheck.tf.program import function_name
from gradcheck.tf.recording import Recording


def unbuilt_layer_results(recording: Recording) -> list[CheckResult]:
    name = function_name(recording.program.function)
    return [CheckResult(Kind.CONNECTED, Status.WARN, evidence=UnbuiltLayer(name, layer),
                        input=layer, cause=Cause(Mistake.UNUSED_LAYER, facts=UnusedLayer(layer)))
            for layer in recording.unbuilt_layers]
