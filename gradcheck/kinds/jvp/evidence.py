"""The jvp check's findings: forward mode (ForwardAccumulator) against reverse mode, and their
words."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence, Finding, internal
from gradcheck.evidence.finding import stated_cause


@dataclasses.dataclass(frozen=True)
class NoReverseVJP(Evidence):
    """Reverse mode gave no VJP of the right shape for `input` (other checks say why)."""

    input: str = internal("")

    def words(self, result: Finding) -> str:
        return f"no reverse-mode VJP for {self.input} to compare with (see the checks above)"


@dataclasses.dataclass(frozen=True)
class ForwardRaised(Evidence):
    """Forward mode raised `error` (its first line) for `input`."""

    input: str = internal("")
    error: str = internal("")

    def words(self, result: Finding) -> str:
        return f"forward mode could not run for {self.input}: {self.error}"


@dataclasses.dataclass(frozen=True)
class NoForwardMode(Evidence):
    """Forward mode gave None for every output although reverse mode gives a gradient."""

    input: str = internal("")

    def words(self, result: Finding) -> str:
        return (f"forward mode (ForwardAccumulator) gives no JVP for {self.input} (None)"
                " although reverse mode gives a gradient: TensorFlow has no forward-mode rule on"
                " the path (a custom_gradient whose forward and grad_fn both leave TensorFlow,"
                " e.g. NumPy through tf.numpy_function, which forward mode would differentiate"
                " through; or an op without one), so the two modes cannot be compared")


@dataclasses.dataclass(frozen=True)
class ModeNotFinite(Evidence):
    """⟨u, Jv⟩ (forward) and ⟨Jᵀu, v⟩ (reverse), one of them not finite."""

    input: str = internal("")
    forward: float = internal(0.0)
    reverse: float = internal(0.0)


@dataclasses.dataclass(frozen=True)
class ReverseNotFinite(ModeNotFinite):
    """Reverse mode is not finite: the non-finite check's."""

    def words(self, result: Finding) -> str:
        return (f"reverse mode gives {self.reverse:.6g} for {self.input} (forward mode"
                f" {self.forward:.6g}): not finite, so not comparable (see the non-finite"
                " check)")


@dataclasses.dataclass(frozen=True)
class ForwardNotFinite(ModeNotFinite):
    """Forward mode alone is not finite; `op`: the first op whose forward-mode tangent is not
    finite while its value and the tangents into it are, when found."""

    op: str | None = None

    def words(self, result: Finding) -> str:
        rule = (f"TensorFlow's forward-mode rule of {self.op} is not finite at this point"
                " (its value and the tangents into it are), not your code" if self.op else
                "a forward-mode rule of an op on the path is not finite at this point")
        return (f"forward mode (ForwardAccumulator) gives ⟨u, Jv⟩ = {self.forward:.6g} for"
                f" {self.input} where reverse mode is finite ({self.reverse:.6g}): {rule}"
                " (code using ForwardAccumulator or tf.autodiff.jvp would see it)")


@dataclasses.dataclass(frozen=True)
class ModesCompared(Evidence):
    """⟨u, Jv⟩ by forward mode, ⟨Jᵀu, v⟩ by reverse mode, and the difference allowed."""

    forward: float
    reverse: float
    allowed: float
    input: str = internal("")


@dataclasses.dataclass(frozen=True)
class ModesIndependent(ModesCompared):
    """Both modes say the outputs do not depend on `input`."""

    def words(self, result: Finding) -> str:
        return f"forward and reverse mode agree that the outputs do not depend on {self.input}"


@dataclasses.dataclass(frozen=True)
class ModesAgree(ModesCompared):
    """The two modes agree within the allowed difference."""

    def words(self, result: Finding) -> str:
        return (f"forward mode ⟨u, Jv⟩ = {self.forward:.6g} matches reverse mode ⟨Jᵀu, v⟩ ="
                f" {self.reverse:.6g} for a random v and u")


@dataclasses.dataclass(frozen=True)
class ModesDisagree(ModesCompared):
    """The two modes disagree: a gradient is inconsistent."""

    def words(self, result: Finding) -> str:
        return (f"forward mode (ForwardAccumulator) gives ⟨u, Jv⟩ = {self.forward:.6g} but"
                f" reverse mode (tape.gradient) gives ⟨Jᵀu, v⟩ = {self.reverse:.6g} for"
                f" {self.input}: the two modes disagree, so a gradient (often a custom_gradient"
                " grad_fn) is inconsistent")


@dataclasses.dataclass(frozen=True)
class NestedModesDisagree(ModesCompared):
    """The two modes disagree where f runs a ForwardAccumulator of its own: forward mode over
    f nests accumulators (forward over forward), which is TensorFlow's to get right."""

    def words(self, result: Finding) -> str:
        return (f"forward mode (ForwardAccumulator) gives ⟨u, Jv⟩ = {self.forward:.6g} but"
                f" reverse mode (tape.gradient) gives ⟨Jᵀu, v⟩ = {self.reverse:.6g} for"
                f" {self.input}; f runs a ForwardAccumulator of its own, so forward mode over f"
                " nests accumulators (forward over forward), which TensorFlow's eager forward"
                " mode does not always get right: a warning about forward mode over f, not a"
                " verdict on its gradient (the jacobian and vjp checks judge that)")


@dataclasses.dataclass(frozen=True)
class ForwardGap(Evidence):
    """No verdict: TensorFlow has no forward-mode rule on the path (its gap, not the user's),
    as the finding's cause says."""

    input: str = internal("")

    def words(self, result: Finding) -> str:
        return f"{self.clause(result)}; {stated_cause(result).fix}"

    def clause(self, result: Finding) -> str:
        return f"no forward-mode verdict for {self.input}: {stated_cause(result).what}"


@dataclasses.dataclass(frozen=True)
class ComparedForwardGap(ForwardGap):
    """A forward-mode gap found after the two modes disagreed: their numbers are kept."""

    forward: float = 0.0
    reverse: float = 0.0
    allowed: float = 0.0
