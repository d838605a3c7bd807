"""Saved models' findings: custom gradients lost in the save, and the `against` check (a
TARGET's gradients against another's, a loaded model's against its original's), with their
words."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence, Finding

SAVE_FIX = ("save it with tf.saved_model.save(obj, path, options=tf.saved_model.SaveOptions("
            "experimental_custom_gradients=True))")


@dataclasses.dataclass(frozen=True)
class UnsavedGradients(Evidence):
    """TensorFlow imported `functions` without the custom gradients they were saved with, and
    a gradient through them fails: no gradient for their `op`."""

    functions: tuple[str, ...]
    op: str

    def words(self, result: Finding) -> str:
        return (f"the saved model has no gradient: TensorFlow finds no gradient for its"
                f" {self.op} op, where a tf.custom_gradient was; {_unsaved(self.functions)}")


@dataclasses.dataclass(frozen=True)
class AgainstOriginal(Evidence):
    """TARGET's VJP (with the same random upstream) against `original`'s at the same
    arguments. `state`: same; values (f's own values differ: the saved model computes
    something else); gradient (the same values, another gradient of `source`); missing (no
    gradient where the original has one); outputs (other outputs). `unsaved`: functions
    imported without their custom gradients."""

    state: str
    original: str
    value_error: float = 0.0
    gradient_error: float = 0.0
    source: str | None = None
    unsaved: tuple[str, ...] = ()

    def words(self, result: Finding) -> str:
        original = self.original
        lost = f"; {_unsaved(self.unsaved)}" if self.unsaved else ""
        if self.state == "same":
            return (f"f's values and VJP match {original}'s at the same arguments (relative error"
                    f" {max(self.value_error, self.gradient_error):.1e})")
        if self.state == "outputs":
            return f"f returns other outputs (number or shapes) than {original}"
        if self.state == "values":
            return (f"f's own values differ from {original}'s (relative error"
                    f" {self.value_error:.2g}): it computes something else, such as a layer"
                    " argument its get_config() does not return (the loaded layer takes its"
                    " default) or weights not saved")
        if self.state == "missing":
            return f"f has no gradient where {original} has one{lost}"
        source = f" for {self.source}" if self.source else ""
        return (f"f's values match {original}'s but its VJP{source} differs (relative error"
                f" {self.gradient_error:.2g}): a custom gradient was not kept{lost or ''}")


def _unsaved(functions: tuple[str, ...]) -> str:
    shown = ", ".join(functions[:3]) + (f" and {len(functions) - 3} more"
                                        if len(functions) > 3 else "")
    return (f"TensorFlow imported {shown} without the custom gradients it was saved with"
            f" (\"Importing a function ... with ops with unsaved custom gradients\"): {SAVE_FIX}")
