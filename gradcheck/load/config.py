"""Read and validate `[tool.gradcheck]` (pyproject.toml or --config FILE) for `gradcheck run`."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from gradcheck.errors import LoadError, UsageError
from gradcheck.load.inputs import UPSTREAM_KEYWORDS, looks_like_file, split_keyword
from gradcheck.load.locations import relative_path
from gradcheck.load.paths import not_a_regular_file
from gradcheck.load.target import split_spec
from gradcheck.options import option_problem

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

TABLE = "tool.gradcheck"
COMMANDS = ("check", "jacobian", "vjp", "hessian")


class ConfigError(UsageError):
    """The configuration file is missing, not TOML, or has a wrong key or value."""


@dataclass(frozen=True)
class CheckConfig:
    """One [[tool.gradcheck.check]] table, with file paths anchored at the config's folder."""

    index: int
    name: str
    target: str  # as written, for display
    load_target: str  # with a relative .py path anchored at the config's folder
    path: str
    input: tuple[str, ...] = ()
    shape: tuple[str, ...] = ()
    inputs: str | None = None
    upstream: tuple[str, ...] = ()
    command: str = "check"
    seed: int = 0
    mode: str = "auto"
    atol: float | None = None
    rtol: float | None = None
    eps: float | None = None
    probes: int = 8
    dtype: str = "auto"
    timeout: float | None = None  # this check's own; RunConfig.timeout is the default
    surrogate: tuple[str, ...] = ()
    wrt: str = "all"
    order: int = 1
    training: bool = False
    compiled: bool = True


@dataclass(frozen=True)
class RunConfig:
    source: Path
    checks: tuple[CheckConfig, ...]
    timeout: float | None = None

    def select(self, pattern: str | None) -> tuple[CheckConfig, ...]:
        """Checks whose name contains PATTERN (or matches it as a glob when it has * ? [)."""
        if not pattern:
            return self.checks
        if any(char in pattern for char in "*?["):
            return tuple(c for c in self.checks if fnmatchcase(c.name, pattern))
        return tuple(c for c in self.checks if pattern in c.name)


def _kind(value: Any) -> str:
    names = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
             dict: "table"}
    return names.get(type(value), type(value).__name__)


def _fail(where: str, problem: str) -> ConfigError:
    return ConfigError(f"{where}: {problem}")


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _fail(where, f"expected a string, got {value!r} ({_kind(value)})")
    if not value.strip():
        raise _fail(where, "must not be empty")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    """A string or an array of strings (one per repeated flag)."""
    if isinstance(value, str):
        return (_string(value, where),)
    if not isinstance(value, list):
        raise _fail(where, f"expected a string or an array of strings, got {_kind(value)}")
    return tuple(_string(item, f"{where}[{i}]") for i, item in enumerate(value))


def _shapes(value: Any, where: str) -> tuple[str, ...]:
    """[[3, 4], [2]] or ["3,4", "2"]: one shape per argument, as --shape text."""
    if not isinstance(value, list) or not value:
        raise _fail(where, "expected an array of shapes, one per argument, e.g. [[3, 4], [2]]")
    shapes = []
    for i, item in enumerate(value):
        here = f"{where}[{i}]"
        if isinstance(item, str):
            shapes.append(item)
            continue
        if not isinstance(item, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) for d in item
        ):
            raise _fail(here, f"expected a shape like [3, 4] or \"3,4\", got {item!r}")
        if any(d <= 0 for d in item):
            raise _fail(here, f"every dimension must be positive, got {item}")
        shapes.append(",".join(str(d) for d in item))
    return tuple(shapes)


def _integer(minimum: int) -> Callable[[Any, str], int]:
    def parse(value: Any, where: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise _fail(where, f"expected an integer, got {value!r} ({_kind(value)})")
        if value < minimum:
            raise _fail(where, f"must be at least {minimum}, got {value}")
        return value

    return parse


def _number(positive: bool) -> Callable[[Any, str], float]:
    def parse(value: Any, where: str) -> float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise _fail(where, f"expected a number, got {value!r} ({_kind(value)})")
        number = float(value)
        if not math.isfinite(number) or number < 0 or (positive and number == 0):
            raise _fail(where, f"must be {'positive' if positive else 'zero or positive'},"
                               f" got {value}")
        return number

    return parse


def _option(name: str, parse: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    """A key that is a check option: its type here, its range by the options' own rules."""
    def check(value: Any, where: str) -> Any:
        parsed = parse(value, where)
        problem = option_problem(name, value)
        if problem is not None:
            raise _fail(where, problem)
        return parsed

    return check


def _number_type(value: Any, where: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise _fail(where, f"expected a number, got {value!r} ({_kind(value)})")
    return float(value)


def _choice(choices: Sequence[str]) -> Callable[[Any, str], str]:
    def parse(value: Any, where: str) -> str:
        if value not in choices:
            raise _fail(where, f"expected one of {', '.join(choices)}, got {value!r}")
        return str(value)

    return parse


def _boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(where, f"expected true or false, got {value!r} ({_kind(value)})")
    return value


def _target(value: Any, where: str) -> str:
    text = _string(value, where)
    try:
        split_spec(text)
    except LoadError as exc:
        raise _fail(where, exc.message) from exc
    return text


CHECK_KEYS: dict[str, Callable[[Any, str], Any]] = {
    "name": _string, "target": _target, "path": _string, "input": _strings, "shape": _shapes,
    "inputs": _target, "upstream": _strings, "command": _choice(COMMANDS),
    "seed": _option("seed", _integer(0)), "mode": _option("mode", _string),
    "atol": _option("atol", _number_type), "rtol": _option("rtol", _number_type),
    "eps": _option("eps", _number_type), "probes": _option("probes", _integer(1)),
    "dtype": _option("dtype", _string), "timeout": _number(True), "surrogate": _strings,
    "wrt": _option("wrt", _string), "order": _option("order", lambda value, where: value),
    "training": _boolean, "compiled": _boolean,
}
TOP_KEYS: dict[str, Callable[[Any, str], Any]] = {
    "path": _string, "timeout": _number(True), "check": lambda value, where: value,
}


def _unknown_keys(table: dict[str, Any], known: Sequence[str], where: str) -> None:
    for key in table:
        if key not in known:
            raise _fail(f"{where}.{key}", f"unknown key; known keys are {', '.join(sorted(known))}")


def _anchor(text: str, base: Path) -> str:
    """A relative file path in the configuration is relative to the configuration's folder."""
    path = Path(text).expanduser()
    return str(path if path.is_absolute() else base / path)


def _anchor_value(spec: str, base: Path) -> str:
    keyword = split_keyword(spec)
    if keyword is not None:
        name, value = keyword
        return f"{name}={_anchor(value, base)}" if looks_like_file(value) else spec
    return _anchor(spec, base) if looks_like_file(spec) else spec


def _anchor_target(spec: str, base: Path) -> str:
    module_part, _, attr = spec.strip().rpartition(":")
    if module_part.endswith(".py") or "/" in module_part:
        return f"{_anchor(module_part, base)}:{attr}"
    return spec


def _check(table: Any, index: int, base: Path, defaults: dict[str, Any]) -> CheckConfig:
    where = f"{TABLE}.check[{index}]"
    if not isinstance(table, dict):
        raise _fail(where, f"expected a table ([[{TABLE}.check]]), got {_kind(table)}")
    _unknown_keys(table, list(CHECK_KEYS), where)
    if "target" not in table:
        raise _fail(f"{where}.target", "missing")
    values = {key: CHECK_KEYS[key](value, f"{where}.{key}") for key, value in table.items()}
    given = [key for key in ("input", "shape", "inputs") if key in values]
    if len(given) > 1:
        raise _fail(where, f"give only one of input, shape and inputs (got {', '.join(given)})")
    target = values.pop("target")
    upstream = values.pop("upstream", ())
    inputs = values.pop("inputs", None)
    return CheckConfig(
        index=index,
        name=values.pop("name", target),
        target=target,
        load_target=_anchor_target(target, base),
        path=_anchor(values.pop("path", defaults.get("path", ".")), base),
        input=tuple(_anchor_value(spec, base) for spec in values.pop("input", ())),
        inputs=_anchor_target(inputs, base) if inputs is not None else None,
        upstream=tuple(spec if spec in UPSTREAM_KEYWORDS else _anchor_value(spec, base)
                       for spec in upstream),
        **values,
    )


def parse_config(data: dict[str, Any], source: Path) -> RunConfig:
    """Validate the parsed TOML document; every problem names its table and key."""
    tool = data.get("tool", {})
    section = tool.get("gradcheck") if isinstance(tool, dict) else None
    if section is None:
        raise ConfigError(f"{relative_path(source)}: no [{TABLE}] table; add"
                          f" [[{TABLE}.check]] tables to it")
    if not isinstance(section, dict):
        raise _fail(TABLE, f"expected a table, got {_kind(section)}")
    _unknown_keys(section, list(TOP_KEYS), TABLE)
    defaults = {key: TOP_KEYS[key](value, f"{TABLE}.{key}") for key, value in section.items()}
    tables = defaults.pop("check", None)
    if tables is None:
        raise _fail(f"{TABLE}.check", f"missing; add at least one [[{TABLE}.check]] table")
    if not isinstance(tables, list):
        raise _fail(f"{TABLE}.check", f"expected an array of tables ([[{TABLE}.check]]),"
                                      f" got {_kind(tables)}")
    if not tables:
        raise _fail(f"{TABLE}.check", f"empty; add at least one [[{TABLE}.check]] table")
    base = source.resolve().parent
    checks = tuple(_check(table, i, base, defaults) for i, table in enumerate(tables))
    seen: dict[str, int] = {}
    for check in checks:
        if check.name in seen:
            raise _fail(f"{TABLE}.check[{check.index}].name",
                        f"{check.name!r} is already the name of check[{seen[check.name]}];"
                        " give each check a distinct name")
        seen[check.name] = check.index
    return RunConfig(source, checks, defaults.get("timeout"))


def find_pyproject(start: Path) -> Path:
    """The nearest pyproject.toml in START or a parent folder."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    raise ConfigError(f"no pyproject.toml in {str(start)!r} or its parents; give --config FILE")


def load_config(config_file: str | None = None, start: Path | None = None) -> RunConfig:
    """Read --config FILE, or the nearest pyproject.toml, and validate it."""
    if config_file is None:
        source = find_pyproject(start or Path.cwd())
    else:
        source = Path(config_file)
        why = not_a_regular_file(source)
        if why is not None:
            raise ConfigError(f"config file {config_file!r} {why}")
    shown = config_file or relative_path(source)
    try:
        with source.open("rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot parse {shown} as TOML: {exc}") from exc
    except RecursionError as exc:
        raise ConfigError(f"cannot parse {shown} as TOML: it is nested too deeply") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot parse {shown} as TOML: it is not UTF-8 text") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {shown}: {exc.strerror or exc}") from exc
    return parse_config(data, source)
