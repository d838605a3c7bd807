"""Evidence of the compiled check: the VJP eagerly, under tf.function and under XLA."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence, Location, internal


@dataclasses.dataclass(frozen=True)
class NoEagerVJP(Evidence):
    """The eager VJP failed or has the wrong shape (other checks say why)."""


@dataclasses.dataclass(frozen=True)
class XlaUnsupported(Evidence):
    """XLA cannot compile the VJP: its `error` (first line), or the `ops` it has no kernel for;
    `op` the failing op when it is found in f (`backward`: the op's gradient), at `location`."""

    error: str | None = internal(None)
    ops: str | None = internal(None)
    op: str | None = internal(None)
    backward: bool = internal(False)
    location: Location | None = internal(None)


@dataclasses.dataclass(frozen=True)
class Untraceable(Evidence):
    """`mode` cannot trace f: its `error` (first line); what to do is the cause's fix."""

    mode: str = internal("")
    error: str = internal("")


@dataclasses.dataclass(frozen=True)
class ValuesDiffer(Evidence):
    """f itself computes `output` otherwise under `mode`: the VJPs are not comparable. `flip`:
    the tf.where whose condition XLA decides otherwise, when one is found; else `diverged`, the
    first op whose value XLA computes otherwise from the same inputs."""

    mode: str = internal("")
    output: str = internal("")
    flip: WhereFlipped | None = internal(None)
    diverged: OpDiverged | None = internal(None)


@dataclasses.dataclass(frozen=True)
class WhereFlipped:
    """A tf.where (at `location`) taking the other branch under XLA at `index` (`count`
    elements); its condition's `comparison` (Greater...) of operands `eager` and `compiled`."""

    location: Location | None
    index: tuple[int, ...]
    count: int
    comparison: str
    eager: tuple[float, ...]
    compiled: tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class OpDiverged:
    """The first op of f (type `op`, at `location`) whose value under XLA differs from the
    eager one while its inputs agree to within rounding: at `index` (`count` elements) it is
    `eager` eagerly and `compiled` under XLA; `unconjugated`: its complex XLA kernel leaves
    out the conjugate its eager one applies; `random`: a random op (XLA draws its own)."""

    location: Location | None
    op: str
    index: tuple[int, ...]
    count: int
    eager: complex
    compiled: complex
    unconjugated: bool = False
    random: bool = False


@dataclasses.dataclass(frozen=True)
class EagerNotFinite(Evidence):
    """The eager VJP for `input` is not finite: the non-finite check's."""

    mode: str = internal("")
    input: str = internal("")


@dataclasses.dataclass(frozen=True)
class NoGradientEither(Evidence):
    """Neither the eager nor the compiled VJP has a gradient for `input`."""

    mode: str = internal("")
    input: str = internal("")


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


@dataclasses.dataclass(frozen=True)
class CompiledMatches(Evidence):
    """The VJP under `mode` matches the eager one."""

    mode: str = internal("")
    max_abs_err: float = internal(0.0)


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


@dataclasses.dataclass(frozen=True)
class CompiledDiffers(CompiledElements):
    """The VJP under `mode` (XLA when `jit`) differs from the eager one, `excess` × the
    allowed error."""

    excess: float = internal(0.0)
    jit: bool = internal(False)


@dataclasses.dataclass(frozen=True)
class CompiledNotFinite(CompiledElements):
    """The VJP under `mode` (XLA when `jit`) is not finite where the eager one is: the
    non-finite diagnosis analyses that variant."""

    non_finite: bool = True
    jit: bool = False
