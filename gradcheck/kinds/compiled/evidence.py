"""The compiled check's findings: the VJP eagerly, under tf.function and under XLA, and their
words."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from gradcheck.evidence import Evidence, Finding, Location, internal
from gradcheck.evidence.causes import NotCompiled
from gradcheck.evidence.finding import stated_cause
from gradcheck.spelling import format_index

if TYPE_CHECKING:  # forensics' facts: read, never built, where a report is shown
    from gradcheck.forensics.diverging_ops import OpDiverged
    from gradcheck.forensics.where_flips import WhereFlipped


@dataclasses.dataclass(frozen=True)
class NoEagerVJP(Evidence):
    """The eager VJP failed or has the wrong shape (other checks say why)."""

    def words(self, result: Finding) -> str:
        return "no eager VJP to compare with (see the checks above)"


@dataclasses.dataclass(frozen=True)
class XlaUnsupported(Evidence):
    """XLA cannot compile the VJP: its `error` (first line), or the `ops` it has no kernel for;
    `op` the failing op when it is found in f (`backward`: the op's gradient), at `location`."""

    error: str | None = internal(None)
    ops: str | None = internal(None)
    op: str | None = internal(None)
    backward: bool = internal(False)
    location: Location | None = internal(None)

    def words(self, result: Finding) -> str:
        said = self.clause(result)
        if self.op is None:
            return said
        gradient = "the gradient of " if self.backward else ""
        return f"{said}; the op: {gradient}{self.op} at {self.location}"

    def clause(self, result: Finding) -> str:
        if self.ops is not None:
            return f"XLA cannot compile the VJP: no XLA kernel for {self.ops}"
        return f"XLA cannot compile the VJP ({self.error})"


@dataclasses.dataclass(frozen=True)
class Untraceable(Evidence):
    """`mode` cannot trace f: its `error` (first line); what to do is the cause's fix."""

    mode: str = internal("")
    error: str = internal("")

    def words(self, result: Finding) -> str:
        return f"{self.clause(result)}; {stated_cause(result).fix}"

    def clause(self, result: Finding) -> str:
        facts = stated_cause(result).facts
        if isinstance(facts, NotCompiled) and facts.gradient is not None:
            return (f"{self.mode} cannot take f's gradient: {stated_cause(result).what};"
                    " the gradient works eagerly only")
        return f"{self.mode} cannot trace f ({self.error}): the gradient works eagerly only"


@dataclasses.dataclass(frozen=True)
class ValuesDiffer(Evidence):
    """f itself computes `output` otherwise under `mode`: the VJPs are not comparable. `flip`:
    the tf.where whose condition XLA decides otherwise, when one is found; else `diverged`, the
    first op whose value XLA computes otherwise from the same inputs."""

    mode: str = internal("")
    output: str = internal("")
    flip: WhereFlipped | None = internal(None)
    diverged: OpDiverged | None = internal(None)

    def words(self, result: Finding) -> str:
        flip = self.flip
        if self.diverged is not None:
            return self._diverged(self.diverged)
        if flip is None:
            return (f"f itself returns other values under {self.mode} ({self.output}"
                    " differs: random ops, or a kernel that computes differently), so its VJPs"
                    " are not comparable")
        at = f" at {flip.location}" if flip.location else ""
        compared = ""
        if len(flip.eager) == 2 and len(flip.compiled) == 2:
            compared = (f" ({flip.comparison} of {flip.eager[0]:.9g} and {flip.eager[1]:.9g}"
                        f" eagerly, of {flip.compiled[0]:.9g} and {flip.compiled[1]:.9g} under"
                        " XLA)")
        return (f"f itself returns other values under {self.mode} ({self.output} differs):"
                f" the tf.where{at} takes the other branch under XLA at"
                f" {format_index(flip.index)}{compared}: its condition is a tie at this point,"
                " which XLA's differently rounded arithmetic breaks the other way; f jumps there,"
                " so the two VJPs are of different branches and not comparable (not a wrong"
                " gradient): check at a point off the tf.where's boundary")

    def _diverged(self, op: OpDiverged) -> str:
        at = f" at {op.location}" if op.location else ""
        said = (f"f itself returns other values under {self.mode} ({self.output} differs),"
                f" so its VJPs are not comparable: the first op whose value XLA computes"
                f" otherwise from the same inputs is {op.op}{at}, in {op.count} element(s) (at"
                f" {format_index(op.index)}: {_number(op.eager)} eagerly,"
                f" {_number(op.compiled)} under XLA)")
        if op.random:
            return (f"{said}: a random op, whose numbers XLA draws otherwise than eager"
                    " TensorFlow (with another generator, and ignoring the seeds of stateful"
                    " ones), not a wrong gradient; draw them outside the function compiled with"
                    " jit_compile=True and pass them in")
        if op.unconjugated:
            return (f"{said}: TensorFlow's XLA kernel of {op.op} leaves out the conjugate its"
                    " eager kernel applies to complex inputs, not your code"
                    f" (tensorflow/tensorflow#62263, #62268); keep {op.op} out of the function"
                    " compiled with jit_compile=True")
        return (f"{said}: TensorFlow's XLA kernel of {op.op} computes otherwise than its eager"
                f" one there, or {op.op} amplifies rounding (its inputs agree to within"
                f" rounding); keep {op.op} out of the function compiled with jit_compile=True if"
                " the difference matters")


def _number(value: complex) -> str:
    return f"{value.real:.6g}" if value.imag == 0 else f"{value:.6g}"


@dataclasses.dataclass(frozen=True)
class EagerNotFinite(Evidence):
    """The eager VJP for `input` is not finite: the non-finite check's."""

    mode: str = internal("")
    input: str = internal("")

    def words(self, result: Finding) -> str:
        return (f"the eager VJP for {self.input} is not finite, so the one under"
                f" {self.mode} is not compared with it (see the non-finite check)")


@dataclasses.dataclass(frozen=True)
class NoGradientEither(Evidence):
    """Neither the eager nor the compiled VJP has a gradient for `input`."""

    mode: str = internal("")
    input: str = internal("")

    def words(self, result: Finding) -> str:
        return f"{self.mode} and eager agree: no gradient for {self.input}"


@dataclasses.dataclass(frozen=True)
class NoneOnly(Evidence):
    """The gradient for `input` is None only eagerly (`eagerly`) or only under `mode`; there,
    the op `cut` of f's traced graph cuts the path (`dataset`: a tf.data op, such as the
    reduce a Python loop over a dataset becomes), at `location`."""

    mode: str = internal("")
    input: str = internal("")
    eagerly: bool = internal(False)
    cut: str | None = internal(None)
    dataset: bool = internal(False)
    location: Location | None = internal(None)

    def words(self, result: Finding) -> str:
        x, mode = self.input, self.mode
        if self.eagerly:
            return f"the gradient for {x} is None eagerly, but not under {mode}"
        said = f"the gradient for {x} is None under {mode}, but not eagerly"
        if self.cut is None:
            return said
        at = f" at {self.location}" if self.location else ""
        said = (f"{said}: in f traced by {mode} the path from {x} is cut by {self.cut}{at},"
                " which has no gradient")
        if not self.dataset:
            return f"{said}; compute it with ops TensorFlow differentiates inside {mode}"
        return (f"{said}: {mode} turns a Python loop over a tf.data.Dataset into a dataset op,"
                f" and TensorFlow does not differentiate through it, so {x}'s gradient is lost"
                " (tensorflow/tensorflow#38453, #36306); fix: take the dataset's elements out"
                " of f (iterate the dataset outside the tf.function and pass each batch in), or"
                " loop over a tensor (for i in tf.range(n) over a stacked tensor), which"
                f" {mode} differentiates")


@dataclasses.dataclass(frozen=True)
class CompiledMatches(Evidence):
    """The VJP under `mode` matches the eager one."""

    mode: str = internal("")
    max_abs_err: float = internal(0.0)

    def words(self, result: Finding) -> str:
        return (f"the VJP under {self.mode} matches the eager one (max abs err"
                f" {self.max_abs_err:.1e})")


@dataclasses.dataclass(frozen=True)
class CompiledElements(Evidence):
    """`count` of `size` elements of the VJP for `input` under `mode` are wrong; the worst,
    at `index`, is `compiled` against `eager`."""

    mode: str = internal("")
    input: str = internal("")
    count: int = internal(0)
    size: int = internal(0)
    index: tuple[int, ...] = internal(())
    compiled: float = internal(0.0)
    eager: float = internal(0.0)

    def _worst(self, result: Finding) -> str:
        """The headline (each kind's clause) and the worst element."""
        return (f"{self.clause(result)}; worst {format_index(self.index)}:"
                f" {self.mode} {self.compiled:.6g}, eager {self.eager:.6g}")


@dataclasses.dataclass(frozen=True)
class CompiledDiffers(CompiledElements):
    """The VJP under `mode` (XLA when `jit`) differs from the eager one, `excess` × the
    allowed error."""

    excess: float = internal(0.0)
    jit: bool = internal(False)

    def words(self, result: Finding) -> str:
        return f"{self._worst(result)} ({self.excess:.3g}× the allowed error)"

    def clause(self, result: Finding) -> str:
        return (f"the VJP for {self.input} under {self.mode} differs from the eager one in"
                f" {self.count} of {self.size} elements")


@dataclasses.dataclass(frozen=True)
class CompiledNotFinite(CompiledElements):
    """The VJP under `mode` (XLA when `jit`) is not finite where the eager one is: the
    non-finite diagnosis analyses that variant."""

    non_finite: bool = True
    jit: bool = False

    def words(self, result: Finding) -> str:
        return self._worst(result)

    def clause(self, result: Finding) -> str:
        return (f"the VJP for {self.input} under {self.mode} is not finite in"
                f" {self.count} of {self.size} elements where the eager one is")
