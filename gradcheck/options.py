"""What a check is asked to do: CheckOptions, the kinds each command runs, and the one
mapping from flag-named settings (command line, configuration, API) to options."""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gradcheck.errors import Phase, UsageError
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
MIN_MEMORY, MAX_MEMORY = 1 << 20, 1 << 50
MODES = ("auto", "full", "fast")
DTYPES = ("auto", "float32", "float64")
# The smallest relative finite-difference step that still moves a float64 element.
MIN_EPS = sys.float_info.epsilon


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
    phase: Callable[[Phase | str], None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for name in RULES:
            problem = option_problem(name, getattr(self, name))
            if problem is not None:
                raise OptionError(name, problem)


def options_from(command: str, settings: Mapping[str, Any], **overrides: Any) -> CheckOptions:
    """CheckOptions from settings named like the flags (`surrogate` or `surrogates`, the
    rest as CheckOptions' fields); unset (None) settings keep their defaults. A bad value is
    an OptionError naming the flag (--max-memory)."""
    names = {f.name for f in dataclasses.fields(CheckOptions)}
    values: dict[str, Any] = {k: v for k, v in settings.items() if k in names and v is not None}
    surrogates = settings.get("surrogates", settings.get("surrogate")) or ()
    values.update(kinds=COMMAND_KINDS[command], surrogates=frozenset(surrogates))
    if command == "hessian":  # custom gradients met on the way are checked to second order
        values["order"] = 2
    values.update(overrides)
    try:
        return CheckOptions(**values)
    except OptionError as error:
        raise OptionError(error.field, error.problem, flag_name(error.field)) from None


def flag_name(field_name: str) -> str:
    """The command-line flag of a CheckOptions field: max_memory is --max-memory."""
    return "--" + {"surrogates": "surrogate"}.get(field_name, field_name).replace("_", "-")


class OptionError(UsageError, ValueError):
    """An option's value is out of its range (exit 2 on the command line; a ValueError for
    the Python API). `name` is how the caller spelled the option (atol, --atol, a key)."""

    def __init__(self, field_name: str, problem: str, name: str | None = None) -> None:
        super().__init__(f"{name or field_name} {problem}")
        self.field, self.problem = field_name, problem


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _tolerance(value: Any) -> str | None:
    if value is None:
        return None
    if not _is_number(value) or not value >= 0:
        return f"must be zero or positive, got {value!r}"
    return None if math.isfinite(value) else f"must be finite, got {value}"


def _eps(value: Any) -> str | None:
    if value is None:
        return None
    if not _is_number(value) or not value > 0:
        return f"must be positive, got {value!r}"
    if not math.isfinite(value):
        return f"must be finite, got {value}"
    if value < MIN_EPS:
        return (f"is {value:g}, below float64's resolution ({MIN_EPS:.1e}): x + eps x would"
                " round back to x and every difference would be 0; leave it out for the"
                " default step")
    return None


def _integer(minimum: int, maximum: float = math.inf) -> Callable[[Any], str | None]:
    def problem(value: Any) -> str | None:
        if not isinstance(value, int) or isinstance(value, bool):
            return f"must be an integer, got {value!r}"
        if value < minimum:
            return f"must be at least {minimum}, got {value}"
        return f"must be at most {maximum}, got {value}" if value > maximum else None

    return problem


def _one_of(choices: tuple[Any, ...]) -> Callable[[Any], str | None]:
    def problem(value: Any) -> str | None:
        if isinstance(value, bool) or value not in choices:
            return f"must be one of {', '.join(map(str, choices))}, got {value!r}"
        return None

    return problem


def _memory(value: Any) -> str | None:
    if not isinstance(value, int) or isinstance(value, bool):
        return f"must be a number of bytes, got {value!r}"
    if value < MIN_MEMORY:
        return f"is {format_size(value)}, below 1MiB"
    return f"is {format_size(value)}, more than 1PiB" if value > MAX_MEMORY else None


def _name(value: Any) -> str | None:
    return None if isinstance(value, str) and value.strip() else f"must be a name, got {value!r}"


# The one validation of every entry point (command line, configuration, Python API).
RULES: dict[str, Callable[[Any], str | None]] = {
    "atol": _tolerance, "rtol": _tolerance, "eps": _eps, "mode": _one_of(MODES),
    "probes": _integer(1, 1 << 20), "seed": _integer(0, 2**64 - 1), "dtype": _one_of(DTYPES),
    "max_memory": _memory, "wrt": _name, "order": _one_of((1, 2)),
}


def option_problem(field_name: str, value: Any) -> str | None:
    """What is wrong with VALUE for the option FIELD_NAME ("must be positive, got 0"), or None."""
    rule = RULES.get(field_name)
    return None if rule is None else rule(value)


def format_size(size: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)):
        if size >= scale:
            return f"{size / scale:.1f}{unit}"
    return f"{size}B"
