"""Layers that can never train because f never calls them (Keras: 'No gradients provided')."""

from __future__ import annotations

from gradcheck.report import Cause, CheckResult, Kind, Status
from gradcheck.tf.program import function_name
from gradcheck.tf.recording import Recording

NO_GRADIENTS = "Keras reports 'No gradients provided for any variable' for such weights"


def unbuilt_layer_results(recording: Recording) -> list[CheckResult]:
    name = function_name(recording.program.function)
    return [CheckResult(
        Kind.CONNECTED, Status.WARN,
        f"{name} never calls its layer {layer}, so the layer has no weights yet and none of"
        f" them would ever train ({NO_GRADIENTS}); an unused layer, or a head not on the path"
        " to the output?", input=layer, cause=Cause("unused-layer", f"{layer} is never called"))
        for layer in recording.unbuilt_layers]
