"""What a check is asked to do: CheckOptions, the kinds each command runs, and the one
mapping from flag-named settings (command line, configuration, API) to options."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gradcheck.report import Kind

# second-order runs only with order=2; hessian (scalar f only) only in `gradcheck hessian`.
ALL_KINDS = frozenset(Kind) - {Kind.HESSIAN}
JACOBIAN_KINDS = frozenset({Kind.JACOBIAN, Kind.GRAD_SHAPE, Kind.CONNECTED, Kind.CUSTOM_GRADIENT,
                            Kind.KINK, Kind.FAST, Kind.NON_FINITE})
COMMAND_KINDS = {
    "jacobian": JACOBIAN_KINDS,
    "hessian": JACOBIAN_KINDS | {Kind.HESSIAN},
    "vjp": frozenset({Kind.VJP, Kind.GRAD_SHAPE, Kind.CONNECTED, Kind.CUSTOM_GRADIENT,
                      Kind.UPSTREAM, Kind.KINK, Kind.FAST, Kind.NON_FINITE}),
    "check": ALL_KINDS,
}
DEFAULT_MAX_MEMORY = 1 << 30


@dataclass(frozen=True)
class CheckOptions:
    upstream: tuple[Any, ...] = ()
    atol: float | None = None
    rtol: float | None = None
    eps: float | None = None
    mode: str = "auto"
    probes: int = 8
    seed: int = 0
    dtype: str = "auto"
    max_memory: int = DEFAULT_MAX_MEMORY
    kinds: frozenset[str] = ALL_KINDS
    explain: bool = False
    # Names of custom gradients that deliberately differ from the true gradient
    # (straight-through estimators, clipping): their mismatches are warnings.
    surrogates: frozenset[str] = frozenset()
    # Sources: "all" (arguments and the trainable variables f reads), "inputs",
    # "variables", or one source's name.
    wrt: str = "all"
    # Call Keras layers and models with training=True (dropout, batch statistics).
    training: bool = False
    # Also compute the VJP under tf.function and XLA and compare (the compiled check).
    compiled: bool = True
    # 2 adds the second-order check (derivatives of the VJP).
    order: int = 1
    # Keep every Jacobian block's arrays in Report.blocks (for pictures and --save).
    keep_blocks: bool = False
    # False: never vectorise (pfor, vectorized_map), e.g. after TensorFlow crashed doing so.
    vectorise: bool = True
    # Called as progress(task, done, total) as work advances; the core never prints.
    progress: Callable[[str, int, int], None] | None = field(default=None, compare=False)
    # Called with what is about to run (the vectorised tape.jacobian of y with respect to x,
    # ...), so that a crash or a time-out in native code can be reported with its phase.
    phase: Callable[[str], None] | None = field(default=None, compare=False)


def options_from(command: str, settings: Mapping[str, Any], **overrides: Any) -> CheckOptions:
    """CheckOptions from settings named like the flags (`surrogate` or `surrogates`, the
    rest as CheckOptions' fields); unset (None) settings keep their defaults."""
    names = {f.name for f in dataclasses.fields(CheckOptions)}
    values: dict[str, Any] = {k: v for k, v in settings.items() if k in names and v is not None}
    surrogates = settings.get("surrogates", settings.get("surrogate")) or ()
    values.update(kinds=COMMAND_KINDS[command], surrogates=frozenset(surrogates))
    if command == "hessian":  # custom gradients met on the way are checked to second order
        values["order"] = 2
    values.update(overrides)
    return CheckOptions(**values)
