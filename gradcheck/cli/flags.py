"""The command line's options: the check options' flags made from gradcheck.options' table,
grouped as the commands share them, and the command line's own output options."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from gradcheck.cli.formats import FORMATS
from gradcheck.options import OPTIONS, SPECS, OptionSpec

_TYPES: dict[type, click.ParamType] = {float: click.FLOAT, int: click.INT, str: click.STRING}
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


class OptionType(click.ParamType):
    """A flag's text as its option's type (a size stays text, for options_from to read);
    whether the value is allowed (a choice, a range) is for CheckOptions to say, as it is for
    the configuration and the Python API."""

    def __init__(self, spec: OptionSpec) -> None:
        self.spec = spec
        self.base = click.STRING if spec.parse is not None else _TYPES[spec.type]
        self.name = self.base.name

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str | None:
        if self.spec.choices is None:
            return None
        return "[" + "|".join(map(str, self.spec.choices)) + "]"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        return self.base.convert(value, param, ctx)


def option(spec: OptionSpec, **changes: Any) -> Decorator:
    """The click option of SPEC (CHANGES: what one command says differently, e.g. help)."""
    default = spec.default if spec.flag_default is ... else spec.flag_default
    settings: dict[str, Any] = {"help": spec.help, "show_default": spec.show_default,
                                "metavar": spec.metavar, "default": default}
    if spec.type is bool and "/" not in spec.flags[-1]:
        settings.update(is_flag=True, flag_value=not spec.default)
    elif spec.type is not bool:
        settings.update(type=OptionType(spec), multiple=spec.multiple)
    return click.option(*spec.flags, spec.parameter, **{**settings, **changes})


def _apply(decorators: list[Decorator], function: Callable[..., Any]) -> Callable[..., Any]:
    for decorator in reversed(decorators):
        function = decorator(function)
    return function


def _group(name: str) -> list[Decorator]:
    return [option(spec) for spec in OPTIONS if spec.group == name]


def input_options(function: Callable[..., Any]) -> Callable[..., Any]:
    return _apply([click.argument("target"), *_group("input")], function)


def upstream_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return _apply(_group("upstream"), function)


def explain_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return _apply(_group("explain"), function)


# What the command line writes besides its report: not check options, so not in the table.
ARTIFACT_OPTIONS: tuple[Decorator, ...] = (
    click.option("--plot", "plot_dir", type=click.Path(file_okay=False), metavar="DIR",
                 help="A PNG and a JSON sidecar per Jacobian block in DIR."),
    click.option("--save", "save_file", type=click.Path(dir_okay=False),
                 metavar="FILE.npz", help="The blocks' arrays, VJPs and upstreams."),
)


def check_options(function: Callable[..., Any]) -> Callable[..., Any]:
    return _apply([*_group("check"), *ARTIFACT_OPTIONS], function)


OUTPUT_OPTIONS: tuple[Decorator, ...] = (
    click.option("--format", "output_format", type=click.Choice(tuple(FORMATS)), default="table",
                 show_default=True),
    click.option("-o", "--output", "output_file", type=click.Path(dir_okay=False),
                 help="Write the report (in --format) to FILE instead of stdout."),
    click.option("-q", "--quiet", is_flag=True, help="Only the summary line."),
    click.option("--traceback", "show_traceback", is_flag=True,
                 help="Show the user's traceback for errors."),
    click.option("--no-color", is_flag=True, help="No colours (NO_COLOR works too)."),
)


def output_options(function: Callable[..., Any]) -> Callable[..., Any]:
    return _apply(list(OUTPUT_OPTIONS), function)


def run_timeout_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return option(SPECS["timeout"], help="Time limit per check (a check's own `timeout` key"
                                         " wins).")(function)
