"""Sentences of saved models: custom gradients lost in the save, and the against check."""

from __future__ import annotations

from gradcheck.evidence.against import AgainstOriginal, UnsavedGradients
from gradcheck.render.sentences.dispatch import sentence
from gradcheck.report import CheckResult

SAVE_FIX = ("save it with tf.saved_model.save(obj, path, options=tf.saved_model.SaveOptions("
            "experimental_custom_gradients=True))")


def _unsaved(functions: tuple[str, ...]) -> str:
    shown = ", ".join(functions[:3]) + (f" and {len(functions) - 3} more"
                                        if len(functions) > 3 else "")
    return (f"TensorFlow imported {shown} without the custom gradients it was saved with"
            f" (\"Importing a function ... with ops with unsaved custom gradients\"): {SAVE_FIX}")


@sentence.register
def _lost(evidence: UnsavedGradients, result: CheckResult) -> str:
    return (f"the saved model has no gradient: TensorFlow finds no gradient for its"
            f" {evidence.op} op, where a tf.custom_gradient was; {_unsaved(evidence.functions)}")


@sentence.register
def _against(evidence: AgainstOriginal, result: CheckResult) -> str:
    original = evidence.original
    lost = f"; {_unsaved(evidence.unsaved)}" if evidence.unsaved else ""
    if evidence.state == "same":
        return (f"f's values and VJP match {original}'s at the same arguments (relative error"
                f" {max(evidence.value_error, evidence.gradient_error):.1e})")
    if evidence.state == "outputs":
        return f"f returns other outputs (number or shapes) than {original}"
    if evidence.state == "values":
        return (f"f's own values differ from {original}'s (relative error"
                f" {evidence.value_error:.2g}): it computes something else, such as a layer"
                " argument its get_config() does not return (the loaded layer takes its"
                " default) or weights not saved")
    if evidence.state == "missing":
        return f"f has no gradient where {original} has one{lost}"
    source = f" for {evidence.source}" if evidence.source else ""
    return (f"f's values match {original}'s but its VJP{source} differs (relative error"
            f" {evidence.gradient_error:.2g}): a custom gradient was not kept{lost or ''}")
