"""Read and validate `[tool.gradcheck]` (pyproject.toml or --config FILE) for `gradcheck run`."""

from __future__ import annotations

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
from gradcheck.options import (
    OPTIONS,
    SPECS,
    CheckOptions,
    OptionError,
    OptionSpec,
    default,
    options_from,
)
from gradcheck.targets.modules import split_spec

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
    options: CheckOptions  # validated, for its command
    input: tuple[str, ...] = ()
    shape: tuple[str, ...] = ()
    inputs: str | None = None
    upstream: tuple[str, ...] = ()
    command: str = "check"

    @property
    def timeout(self) -> float | None:
        """This check's own limit; RunConfig.timeout is the default."""
        return self.options.timeout


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


def _integer(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise _fail(where, f"expected an integer, got {value!r} ({_kind(value)})")
    return value


def _number(value: Any, where: str) -> float:
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


def _number_or_auto(value: Any, where: str) -> float | str:
    if value == "auto":
        return "auto"
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise _fail(where, f"expected a number or \"auto\", got {value!r} ({_kind(value)})")
    return float(value)


Parser = Callable[[Any, str], Any]
_TYPES: dict[type, Parser] = {bool: _boolean, int: _integer, float: _number, str: _string}
# Options whose values are read in their own way: shapes as arrays, inputs as a TARGET, a
# loss scale as a number or "auto".
_OWN_PARSERS: dict[str, Parser] = {"shape": _shapes, "inputs": _target,
                                   "loss_scale": _number_or_auto}


def _parser(spec: OptionSpec) -> Parser:
    """The key's TOML type, as its option's type says (ranges are CheckOptions' to check)."""
    if spec.name in _OWN_PARSERS:
        return _OWN_PARSERS[spec.name]
    return _strings if spec.multiple else _TYPES[spec.type]


# A check's keys: its own (what it is called, what it checks, which command) and the options'.
OWN_KEYS: dict[str, Parser] = {"name": _string, "target": _target, "command": _choice(COMMANDS)}
OPTION_KEYS: dict[str, OptionSpec] = {
    spec.config_key: spec for spec in OPTIONS if spec.config_key is not None}
CHECK_KEYS: dict[str, Parser] = {**OWN_KEYS, **{
    key: _parser(spec) for key, spec in OPTION_KEYS.items()}}
# Keys of [tool.gradcheck] itself, besides its checks: the default of every check's own key.
DEFAULT_KEYS = ("path", "timeout")


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


def _options(command: str, values: dict[str, Any], where: str) -> CheckOptions:
    """The checked options of one check; a bad value names its key."""
    settings = {OPTION_KEYS[key].name: value for key, value in values.items()
                if key in OPTION_KEYS}
    try:
        return options_from(command, settings)
    except OptionError as error:
        raise _fail(f"{where}.{SPECS[error.field].config_key}", error.problem) from None


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
    command = values.get("command", "check")
    inputs = values.get("inputs")
    return CheckConfig(
        index=index,
        name=values.get("name", values["target"]),
        target=values["target"],
        load_target=_anchor_target(values["target"], base),
        path=_anchor(values.get("path", defaults.get("path", default("path"))), base),
        options=_options(command, values, where),
        input=tuple(_anchor_value(spec, base) for spec in values.get("input", ())),
        shape=values.get("shape", ()),
        inputs=_anchor_target(inputs, base) if inputs is not None else None,
        upstream=tuple(spec if spec in UPSTREAM_KEYWORDS else _anchor_value(spec, base)
                       for spec in values.get("upstream", ())),
        command=command,
    )


def _defaults(section: dict[str, Any]) -> dict[str, Any]:
    """[tool.gradcheck]'s own keys (path, timeout), checked as every check's would be."""
    _unknown_keys(section, [*DEFAULT_KEYS, "check"], TABLE)
    defaults = {}
    for key in DEFAULT_KEYS:
        if key in section:
            spec = OPTION_KEYS[key]
            defaults[key] = CHECK_KEYS[key](section[key], f"{TABLE}.{key}")
            problem = spec.problem(defaults[key])
            if problem is not None:
                raise _fail(f"{TABLE}.{key}", problem)
    return defaults


def parse_config(data: dict[str, Any], source: Path) -> RunConfig:
    """Validate the parsed TOML document; every problem names its table and key."""
    tool = data.get("tool", {})
    section = tool.get("gradcheck") if isinstance(tool, dict) else None
    if section is None:
        raise ConfigError(f"{relative_path(source)}: no [{TABLE}] table; add"
                          f" [[{TABLE}.check]] tables to it")
    if not isinstance(section, dict):
        raise _fail(TABLE, f"expected a table, got {_kind(section)}")
    defaults = _defaults(section)
    tables = section.get("check")
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


def _nearest_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml in START or a parent folder, if any."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def find_pyproject(start: Path) -> Path:
    """The nearest pyproject.toml in START or a parent folder."""
    source = _nearest_pyproject(start)
    if source is None:
        raise ConfigError(f"no pyproject.toml in {str(start)!r} or its parents; give --config FILE")
    return source


def _read_toml(source: Path, source_name: str) -> dict[str, Any]:
    try:
        with source.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot parse {source_name} as TOML: {exc}") from exc
    except RecursionError as exc:
        raise ConfigError(f"cannot parse {source_name} as TOML: it is nested too deeply") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot parse {source_name} as TOML: it is not UTF-8 text") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {source_name}: {exc.strerror or exc}") from exc


def load_config(config_file: str | None = None, start: Path | None = None) -> RunConfig:
    """Read --config FILE, or the nearest pyproject.toml, and validate it."""
    if config_file is None:
        source = find_pyproject(start or Path.cwd())
    else:
        source = Path(config_file)
        why = not_a_regular_file(source)
        if why is not None:
            raise ConfigError(f"config file {config_file!r} {why}")
    return parse_config(_read_toml(source, config_file or relative_path(source)), source)


def command_defaults(start: Path) -> dict[str, Any]:
    """The defaults `gradcheck check` (jacobian, vjp, hessian) takes from the nearest
    pyproject.toml's [tool.gradcheck], as `gradcheck run` does: its `path` (anchored at that
    file's folder) and `timeout`, by option name; none without such a table."""
    source = _nearest_pyproject(start)
    if source is None:
        return {}
    tool = _read_toml(source, relative_path(source)).get("tool", {})
    section = tool.get("gradcheck") if isinstance(tool, dict) else None
    if not isinstance(section, dict):
        return {}
    defaults = _defaults(section)
    if "path" in defaults:
        defaults["path"] = _anchor(defaults["path"], source.resolve().parent)
    return {OPTION_KEYS[key].name: value for key, value in defaults.items()}
