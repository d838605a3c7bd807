"""Evidence the diagnosis finds itself: a custom gradient judged on its own, where a gradient
path is cut."""

from __future__ import annotations

import dataclasses
from typing import Any

from gradcheck.evidence import Evidence, Finding, internal
from gradcheck.evidence.finding import stated_cause

USUAL_CAUSES = (
    "tf.Variable(...) built from inputs, .numpy()/float()/NumPy ops on tensors,"
    " tf.stop_gradient, casts to integer types, round/floor/ceil/argmax, tf.numpy_function,"
    " ops without a registered gradient"
)


@dataclasses.dataclass(frozen=True)
class SiteMistake(Evidence):
    """A custom gradient's mistake, told by its cause; `finding` (a CheckResult: this layer
    lies below the report's) is the finding of its own check it retells, whose JSON `details`
    it publishes."""

    finding: Any = internal(None)

    def published(self) -> dict[str, Any]:
        evidence = None if self.finding is None else self.finding.evidence
        return {} if evidence is None else evidence.published()

    def words(self, result: Finding) -> str:
        fixed = stated_cause(result).fix
        return self.clause(result) + (f"; {fixed}" if fixed else "")

    def clause(self, result: Finding) -> str:
        cause = stated_cause(result)
        return f"{cause.culprit}: {cause.what}"


@dataclasses.dataclass(frozen=True)
class SiteCorrect(Evidence):
    """The custom gradient `site` returns uᵀJ, checked on its own."""

    site: str = internal("")

    def words(self, result: Finding) -> str:
        return (f"{self.site}: grad_fn returns uᵀJ, checked on its own against finite"
                " differences")


@dataclasses.dataclass(frozen=True)
class SiteUnchecked(Evidence):
    """The custom gradient `name` could not be checked on its own: `error`."""

    name: str = internal("")
    error: str = internal("")

    def words(self, result: Finding) -> str:
        return f"custom_gradient {self.name} could not be checked on its own: {self.error}"


@dataclasses.dataclass(frozen=True)
class SiteNoForwardMode(Evidence):
    """Forward mode gives no JVP through the custom gradient `site`."""

    site: str = internal("")

    def words(self, result: Finding) -> str:
        return (f"{self.site}: forward mode (ForwardAccumulator) gives no JVP through it for"
                f" {result.input}: its forward and its grad_fn both leave TensorFlow (NumPy,"
                " tf.numpy_function, .numpy()), and forward mode differentiates through one of"
                " them; not a wrong gradient, but forward mode (and the jvp check) cannot be"
                " used")


@dataclasses.dataclass(frozen=True)
class CutFound(Evidence):
    """The gradient path is cut where the result's cause says."""

    def words(self, result: Finding) -> str:
        cause = stated_cause(result)
        return f"{cause.what}; {cause.fix}"

    def clause(self, result: Finding) -> str:
        return stated_cause(result).what


@dataclasses.dataclass(frozen=True)
class CutNotFound(Evidence):
    """The gradient path from the result's input is lost, but not at an op found (`note`:
    why, when known)."""

    note: str | None = internal()

    def words(self, result: Finding) -> str:
        return f"{self.clause(result)}; usual causes: {USUAL_CAUSES}"

    def clause(self, result: Finding) -> str:
        why = f" ({self.note})" if self.note else ""
        return f"could not locate where the gradient path from {result.input} is lost{why}"
