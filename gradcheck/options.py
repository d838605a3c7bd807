"""What a check is asked to do: the one table of options (every entry point's spelling,
default, help), CheckOptions (validated when made) and the kinds each command runs."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from gradcheck.errors import UsageError
from gradcheck.report import Kind
from gradcheck.spelling import format_size

# second-order runs only with order=2; hessian (scalar f only) only in `gradcheck hessian`.
ALL_KINDS = frozenset(Kind) - {Kind.HESSIAN}
JACOBIAN_KINDS = frozenset({Kind.JACOBIAN, Kind.GRAD_SHAPE, Kind.CONNECTED, Kind.CUSTOM_GRADIENT,
                            Kind.KINK, Kind.FAST, Kind.NON_FINITE})
# What the fast or full mode's sweep over the inputs finds (a non-finite-only diagnosis needs none).
SWEPT_KINDS = JACOBIAN_KINDS - {Kind.NON_FINITE} | {Kind.VJP}
COMMAND_KINDS = {
    "jacobian": JACOBIAN_KINDS,
    "hessian": JACOBIAN_KINDS | {Kind.HESSIAN},
    "vjp": frozenset({Kind.VJP, Kind.GRAD_SHAPE, Kind.CONNECTED, Kind.CUSTOM_GRADIENT,
                      Kind.UPSTREAM, Kind.KINK, Kind.FAST, Kind.NON_FINITE}),
    "check": ALL_KINDS,
}
DEFAULT_MAX_MEMORY = 1 << 30
MIN_MEMORY, MAX_MEMORY = 1 << 20, 1 << 50
# A worker may use this much more memory than --max-memory (and at least the floor).
MEMORY_FACTOR, MEMORY_FLOOR = 4, 2 << 30
MODES = ("auto", "full", "fast")
DTYPES = ("auto", "float32", "float64")
# The smallest relative finite-difference step that still moves a float64 element.
MIN_EPS = sys.float_info.epsilon
Rule = Callable[[Any], "str | None"]


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


def _timeout(value: Any) -> str | None:
    if value is None or (_is_number(value) and 0 < value < math.inf):
        return None
    return f"must be a positive number of seconds, got {value}"


def _integer(minimum: int, maximum: float = math.inf) -> Rule:
    def problem(value: Any) -> str | None:
        if not isinstance(value, int) or isinstance(value, bool):
            return f"must be an integer, got {value!r}"
        if value < minimum:
            return f"must be at least {minimum}, got {value}"
        return f"must be at most {maximum}, got {value}" if value > maximum else None

    return problem


def _one_of(choices: tuple[Any, ...]) -> Rule:
    def problem(value: Any) -> str | None:
        if isinstance(value, bool) or value not in choices:
            return f"must be one of {', '.join(map(str, choices))}, got {value!r}"
        return None

    return problem


def _memory(value: Any) -> str | None:
    if not isinstance(value, int) or isinstance(value, bool):
        return f"must be a number of bytes, got {value!r}"
    if value < MIN_MEMORY:
        return f"is {value} bytes, below 1MiB"
    return f"is {format_size(value)}, more than 1PiB" if value > MAX_MEMORY else None


def _loss_scale(value: Any) -> str | None:
    if value is None or value == "auto" or (_is_number(value) and 0 < value < math.inf):
        return None
    return f"must be a positive number or auto, got {value!r}"


def _strategy(value: Any) -> str | None:
    if value is None:
        return None
    kind, _, count = str(value).partition(":")
    if kind not in ("mirrored", "multiworker") or not count.isdigit() or int(count) < 1:
        return f"must be mirrored:N or multiworker:N with N at least 1, got {value!r}"
    return None


def _micro_batches(value: Any) -> str | None:
    return None if value is None else _integer(1)(value)


def _optional_target(value: Any) -> str | None:
    return None if value is None else _name(value)


def _parse_loss_scale(text: str) -> Any:
    cleaned = text.strip().lower()
    if cleaned == "auto":
        return "auto"
    try:
        return float(cleaned)
    except ValueError:
        return text


def _name(value: Any) -> str | None:
    return None if isinstance(value, str) and value.strip() else f"must be a name, got {value!r}"


def parse_size(text: str) -> int:
    """512MiB, 2GB, 1e9 as bytes (whether the size is allowed is max_memory's rule)."""
    units = {"": 1, "B": 1, "K": 1 << 10, "KB": 1000, "KIB": 1 << 10, "M": 1 << 20,
             "MB": 10**6, "MIB": 1 << 20, "G": 1 << 30, "GB": 10**9, "GIB": 1 << 30,
             "T": 1 << 40, "TB": 10**12, "TIB": 1 << 40}
    cleaned = text.strip().upper()
    number = cleaned.rstrip("BKMGTI")
    try:
        value = float(number) * units[cleaned[len(number):]]
    except (ValueError, KeyError):
        value = math.nan
    if not math.isfinite(value):
        raise OptionError("max_memory", f"{text!r} must be a size like 512MiB or 2GiB")
    return int(value)


@dataclass(frozen=True)
class OptionSpec:
    """One option as every entry point spells it; None where an entry point lacks it."""

    name: str  # a CheckOptions field, or a setting of the target's request (inputs, path)
    type: type  # the value's type: float, int, str or bool (of each item when `multiple`)
    default: Any
    help: str | None = None
    flags: tuple[str, ...] = ()  # ("-i", "--input"); a switch is ("--compiled/--no-compiled",)
    dest: str | None = None  # click's parameter name, when it is not `name`
    group: str = "check"  # which command-line group shows it: input, upstream, check, explain
    config_key: str | None = None  # its key in [[tool.gradcheck.check]]
    keyword: str | None = None  # its keyword of gradcheck.check
    choices: tuple[Any, ...] | None = None
    rule: Rule | None = None  # what is wrong with a value (choices have their own)
    metavar: str | None = None
    multiple: bool = False  # a repeatable flag; an array in the configuration
    show_default: bool = False
    flag_default: Any = ...  # the command line's default, when it is not `default`
    parse: Callable[[str], Any] | None = None  # the flag's text as a value, if not by type

    @property
    def parameter(self) -> str:
        return self.dest or self.name

    @property
    def flag(self) -> str | None:
        """The flag errors name: --max-memory, --compiled."""
        return self.flags[-1].split("/")[0] if self.flags else None

    def problem(self, value: Any) -> str | None:
        rule = self.rule or (_one_of(self.choices) if self.choices is not None else None)
        return None if rule is None else rule(value)


def _spec(name: str, type_: type, default: Any, help_: str | None = None,
          **more: Any) -> OptionSpec:
    """A spec whose flag, configuration key and keyword are its name unless told otherwise."""
    more.setdefault("flags", ("--" + name.replace("_", "-"),))
    more.setdefault("config_key", name)
    more.setdefault("keyword", name)
    return OptionSpec(name, type_, default, help_, **more)


# The one declaration of the options: command-line help shows them in this order.
OPTIONS: tuple[OptionSpec, ...] = (
    _spec("input", str, (), "An argument: .npy, .npz, or a literal like '[1.0, 2.0]'; NAME=VALUE"
          " for a keyword. Repeatable, in order.", flags=("-i", "--input"), dest="input_specs",
          group="input", keyword=None, metavar="VALUE", multiple=True),
    _spec("shape", str, (), "Random normal argument of this shape (repeatable).",
          dest="shapes", group="input", keyword=None, metavar="2,3", multiple=True),
    _spec("inputs", str, None, "Arguments from a value or zero-argument callable.",
          dest="inputs_attr", group="input", keyword=None, metavar="MOD:ATTR"),
    _spec("path", str, ".", "Directory put first on sys.path.", group="input",
          show_default=True),
    _spec("seed", int, 0, "Seed for --shape and random upstreams.", group="input",
          rule=_integer(0, 2**64 - 1), show_default=True),
    _spec("instrument", bool, True, "Do not observe the tf.custom_gradient functions f calls.",
          flags=("--no-instrument",), group="input", config_key=None),
    _spec("upstream", str, (), "Upstream per output: .npy/.npz, literal, 'ones' or 'random'"
          " (default).", dest="upstream_specs", group="upstream", metavar="U", multiple=True),
    _spec("atol", float, None, "Absolute tolerance (default per dtype).", rule=_tolerance),
    _spec("rtol", float, None, "Relative tolerance (default per dtype).", rule=_tolerance),
    _spec("eps", float, None, "Finite-difference step (default: eps^(1/3) x element scale).",
          rule=_eps),
    _spec("mode", str, "auto", choices=MODES, show_default=True),
    _spec("probes", int, 8, "Random directions in fast mode.", rule=_integer(1, 1 << 20),
          show_default=True),
    _spec("dtype", str, "auto", choices=DTYPES, show_default=True),
    _spec("surrogates", str, (), "A custom_gradient that deliberately differs from the true"
          " gradient (straight-through, clipping): its mismatch is a warning.",
          flags=("--surrogate",), config_key="surrogate", metavar="NAME", multiple=True),
    _spec("max_memory", int, DEFAULT_MAX_MEMORY, "Memory budget for batched evaluations and"
          " Jacobians.", config_key=None, rule=_memory, metavar="SIZE", show_default=True,
          flag_default="1GiB",
          parse=parse_size),
    _spec("timeout", float, None, "Kill the check (exit code 3) after SECONDS of"
          " waiting, TensorFlow's start-up in the worker included.", rule=_timeout,
          metavar="SECONDS"),
    _spec("wrt", str, "all", "Sources: the arguments, the trainable variables f reads, both, or"
          " one of them by name (e.g. dense/kernel).", rule=_name,
          metavar="inputs|variables|all|NAME", show_default=True),
    _spec("training", bool, False, "Call Keras layers and models with training=True."),
    _spec("loss_scale", str, None, "Check the low-precision gradient of S·f as a"
          " LossScaleOptimizer computes it (auto: the scale the model's LossScaleOptimizer"
          " holds).", rule=_loss_scale, metavar="S|auto", parse=_parse_loss_scale),
    _spec("strategy", str, None, "Also run f under tf.distribute.MirroredStrategy with its batch"
          " split over N replicas (logical CPUs without GPUs), or MultiWorkerMirroredStrategy"
          " over N local worker processes, and compare the summed gradient with the"
          " single-device one.", rule=_strategy, metavar="mirrored:N|multiworker:N"),
    _spec("accumulate", int, None, "Also accumulate the gradients of K micro-batches of f's"
          " batch (their sum over K, as Keras' gradient_accumulation_steps applies) and compare"
          " with the whole batch's.", rule=_micro_batches, metavar="K"),
    _spec("against", str, None, "Also compare f's values and VJP with TARGET's at the same"
          " arguments (a loaded model against its original).", rule=_optional_target,
          metavar="TARGET"),
    _spec("order", int, 1, "2 adds the second-order check (the derivative of the VJP).",
          choices=(1, 2), show_default=True),
    _spec("compiled", bool, True, "Also compare the VJP under tf.function and XLA (check only).",
          flags=("--compiled/--no-compiled",), show_default=True),
    _spec("explain", bool, False, "Explain what tape.gradient returns (J, 1ᵀJ, uᵀJ, gradient *"
          " u) per input; on by default except with --format junit or -q.",
          flags=("--explain/--no-explain",), group="explain", config_key=None,
          flag_default=None),  # unset on the command line: each command decides
)
SPECS: dict[str, OptionSpec] = {spec.name: spec for spec in OPTIONS}


def default(name: str) -> Any:
    """The default of the option NAME, for the entry points' signatures."""
    return SPECS[name].default


def option_problem(name: str, value: Any) -> str | None:
    """What is wrong with VALUE for the option NAME ("must be positive, got 0"), or None."""
    spec = SPECS.get(name)
    return None if spec is None else spec.problem(value)


@dataclass(frozen=True)
class CheckOptions:
    """What the user asked of the check, validated once here whether it came from a flag, the
    configuration or an API keyword (OPTIONS above names each). How the run goes (kept
    blocks, vectorisation, the progress and phase callbacks) travels beside it, in a
    CheckSettings (gradcheck.check_settings)."""

    upstream: tuple[Any, ...] = ()
    atol: float | None = default("atol")
    rtol: float | None = default("rtol")
    eps: float | None = default("eps")
    mode: str = default("mode")
    probes: int = default("probes")
    seed: int = default("seed")
    dtype: str = default("dtype")
    max_memory: int = default("max_memory")
    kinds: frozenset[str] = ALL_KINDS
    explain: bool = default("explain")
    # Names of custom gradients that deliberately differ from the true gradient
    # (straight-through estimators, clipping): their mismatches are warnings.
    surrogates: frozenset[str] = frozenset()
    # Sources: "all" (arguments and the trainable variables f reads), "inputs",
    # "variables", or one source's name.
    wrt: str = default("wrt")
    # Call Keras layers and models with training=True (dropout, batch statistics).
    training: bool = default("training")
    # Also compute the VJP under tf.function and XLA and compare (the compiled check).
    compiled: bool = default("compiled")
    # 2 adds the second-order check (derivatives of the VJP).
    order: int = default("order")
    # The loss scale of the precision check: a number, "auto" or None (1).
    loss_scale: float | str | None = default("loss_scale")
    # mirrored:N adds the strategy check.
    strategy: str | None = default("strategy")
    # K adds the accumulation check (K micro-batches against the whole batch).
    accumulate: int | None = default("accumulate")
    # A TARGET whose values and VJP f's are compared with (the against check).
    against: str | None = default("against")
    # Seconds the worker process running the check may take (the parent enforces it).
    timeout: float | None = default("timeout")

    def __post_init__(self) -> None:
        """The one validation of every entry point (command line, configuration, Python API)."""
        for spec in _FIELD_SPECS:
            problem = spec.problem(getattr(self, spec.name))
            if problem is not None:
                raise OptionError(spec.name, problem)


_FIELDS = frozenset(f.name for f in fields(CheckOptions))
_FIELD_SPECS = tuple(spec for spec in OPTIONS if spec.name in _FIELDS)


def options_from(command: str, settings: Mapping[str, Any], **overrides: Any) -> CheckOptions:
    """CheckOptions for COMMAND from settings named as the table names them (other names are
    not check options and are left out; text is parsed where the option says how, as a size);
    unset (None) settings keep their defaults. A bad value is an OptionError naming the flag
    (--max-memory)."""
    values: dict[str, Any] = {k: v for k, v in settings.items() if k in _FIELDS and v is not None}
    values.update(kinds=COMMAND_KINDS[command],
                  surrogates=frozenset(values.get("surrogates", ())))
    if command == "hessian":  # custom gradients met on the way are checked to second order
        values["order"] = 2
    values.update(overrides)
    try:
        for spec in _FIELD_SPECS:
            if spec.parse is not None and isinstance(values.get(spec.name), str):
                values[spec.name] = spec.parse(values[spec.name])
        return CheckOptions(**values)
    except OptionError as error:
        raise OptionError(error.field, error.problem, SPECS[error.field].flag) from None


def memory_cap(max_memory: int) -> int:
    """The memory a worker may use before it is stopped."""
    return max(MEMORY_FACTOR * max_memory, MEMORY_FLOOR)


def memory_cap_rule() -> str:
    """How memory_cap is derived from --max-memory, in words for messages."""
    return f"{MEMORY_FACTOR} x --max-memory, at least {MEMORY_FLOOR >> 30}GiB"
