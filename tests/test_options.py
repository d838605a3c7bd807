"""The one table of options: every option reaches the command line, the configuration and the
Python API from it, and a bad value is refused in the same words whatever the entry point."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import Result

import gradcheck
from gradcheck.check_settings import CheckSettings
from gradcheck.cli.command_options import CommandOptions
from gradcheck.cli.commands import cli
from gradcheck.cli.flags import output_options
from gradcheck.errors import ExitCode, UsageError
from gradcheck.load.config import CHECK_KEYS, OWN_KEYS, parse_config
from gradcheck.options import OPTIONS, SPECS, CheckOptions, OptionError, OptionSpec, options_from

Run = Callable[..., Result]
CHECK_COMMANDS = ("check", "jacobian", "vjp", "hessian")
FIELDS = {f.name for f in dataclasses.fields(CheckOptions)}
# What only one entry point has: how the API is called, what the command line writes.
API_ONLY = {"f", "args", "kwargs", "kinds", "keep_blocks", "isolate"}
CLI_ONLY = {"target", "plot_dir", "save_file"}
INTERNAL_FIELDS = {"kinds"}
# A value other than the default for each option, as the configuration gives it.
SAMPLES: dict[str, Any] = {
    "input": ["[1.0]"], "shape": [[2]], "inputs": "m:g", "path": "src", "seed": 3,
    "upstream": ["ones"], "atol": 0.5, "rtol": 0.25, "eps": 1e-4, "mode": "fast", "probes": 3,
    "dtype": "float32", "surrogates": ["ste"], "max_memory": 2 << 30, "timeout": 9.0,
    "wrt": "inputs", "training": True, "order": 2, "compiled": False, "instrument": False,
    "explain": True, "loss_scale": 1024.0, "strategy": "mirrored:2", "accumulate": 2,
    "against": "m:original",
}
SOURCE = Path("/project/pyproject.toml")
FLAG_TEXTS = {"shape": ["2"], "max_memory": ["2GiB"], "loss_scale": ["1024"]}
# What the target's request carries (TargetRequest, CheckConfig), not CheckOptions.
REQUEST = {"input", "shape", "inputs", "path", "upstream", "instrument"}


def _params(command: str) -> dict[str, click.Parameter]:
    return {param.name: param for param in cli.commands[command].params if param.name}


def _output_params() -> set[str]:
    return {param.name for param in click.command()(output_options(lambda **_: None)).params
            if param.name}


def _config_check(key: str, value: Any) -> Any:
    table = {"target": "m:f", key: value}
    return parse_config({"tool": {"gradcheck": {"check": [table]}}}, SOURCE).checks[0]


def _flag_arguments(spec: OptionSpec) -> list[str]:
    """The sample value as a command line gives it."""
    value = SAMPLES[spec.name]
    if spec.type is bool:  # a switch's --no- side, or a flag that sets the other value
        on, _, off = spec.flags[-1].partition("/")
        return [on if value or not off else off]
    texts = FLAG_TEXTS.get(spec.name, value if isinstance(value, list) else [value])
    return [text for item in texts for text in (spec.flags[-1], str(item))]


def test_every_option_has_a_sample_that_is_not_its_default() -> None:
    assert set(SAMPLES) == set(SPECS)
    for spec in OPTIONS:
        assert spec.problem(spec.default) is None, spec.name
        assert SAMPLES[spec.name] != spec.default, spec.name


@pytest.mark.parametrize("spec", [s for s in OPTIONS if s.flags], ids=lambda s: s.name)
def test_every_flag_comes_from_the_table_and_reaches_check_options(spec: OptionSpec) -> None:
    commands = {"explain": ("vjp",), "upstream": ("vjp", "check")}.get(spec.group, CHECK_COMMANDS)
    for command in commands:
        param = _params(command)[spec.parameter]
        assert [*param.opts, *param.secondary_opts] == [
            flag for text in spec.flags for flag in text.split("/")]
        assert param.help == spec.help
    context = cli.commands[commands[0]].make_context(commands[0], ["m:f", *_flag_arguments(spec)])
    value = context.params[spec.parameter]
    if spec.name not in REQUEST:
        value = getattr(options_from(commands[0], context.params), spec.name)
    expected = FLAG_TEXTS["shape"] if spec.name == "shape" else SAMPLES[spec.name]
    assert value == (set(expected) if isinstance(value, frozenset) else
                     tuple(expected) if isinstance(value, tuple) else expected)


@pytest.mark.parametrize("spec", [s for s in OPTIONS if s.config_key], ids=lambda s: s.name)
def test_every_config_key_comes_from_the_table_and_reaches_the_check(spec: OptionSpec) -> None:
    assert spec.config_key is not None
    given = _config_check(spec.config_key, SAMPLES[spec.name])
    plain = _config_check("name", "plain")
    if spec.name in REQUEST:
        assert getattr(given, spec.name) != getattr(plain, spec.name)
    else:
        assert getattr(given.options, spec.name) != getattr(plain.options, spec.name)


def test_every_api_keyword_comes_from_the_table_with_its_default() -> None:
    parameters = inspect.signature(gradcheck.check).parameters
    for spec in OPTIONS:
        if spec.keyword is not None:
            default = parameters[spec.keyword].default
            # upstream=None is the API's "not given": random, as the table's ().
            assert default == (None if spec.name == "upstream" else spec.default), spec.name


def test_no_option_is_declared_outside_the_table() -> None:
    parameters = set(inspect.signature(gradcheck.check).parameters)
    assert parameters - API_ONLY == {s.keyword for s in OPTIONS if s.keyword}
    assert set(CHECK_KEYS) - set(OWN_KEYS) == {s.config_key for s in OPTIONS if s.config_key}
    for command in CHECK_COMMANDS:
        declared = set(_params(command)) - _output_params() - CLI_ONLY - {"help"}
        assert declared <= {s.parameter for s in OPTIONS if s.flags}, command
    assert set(SPECS) >= FIELDS - INTERNAL_FIELDS


# The brief's four values, and the other ranges, from each entry point.
BAD = [("atol", -1, "must be zero or positive"), ("mode", "slow",
        "must be one of auto, full, fast"), ("eps", -1, "must be positive"),
       ("probes", 0, "must be at least 1"), ("seed", -1, "must be at least 0"),
       ("order", 3, "must be one of 1, 2"), ("dtype", "float16",
        "must be one of auto, float32, float64"),
       ("timeout", -1, "must be a positive number of seconds")]


@pytest.mark.parametrize(("name", "value", "words"), BAD)
def test_the_api_refuses_a_bad_value_before_anything_runs(name: str, value: Any,
                                                          words: str) -> None:
    with pytest.raises(OptionError) as caught:
        gradcheck.check(lambda x: x, [0.5, 1.0], **{name: value})
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, UsageError)
    assert str(caught.value) == f"{name} {words}, got {value!r}"


@pytest.mark.parametrize(("name", "value", "words"), BAD)
def test_the_command_line_and_the_configuration_refuse_it_in_the_same_words(
        name: str, value: Any, words: str, tmp_path: Path, run_cli: Run) -> None:
    spec = SPECS[name]
    shown = repr(float(value)) if spec.type is float else repr(value)
    result = run_cli(["check", "m:f", f"{spec.flag}={value}"])
    assert result.exit_code == ExitCode.USAGE_ERROR
    assert result.stderr == f"Error: {spec.flag} {words}, got {shown}\n"
    toml = repr(float(value)) if spec.type is float else repr(value).replace("'", '"')
    config = tmp_path / "gradcheck.toml"
    config.write_text(f'[[tool.gradcheck.check]]\ntarget = "m:f"\n{spec.config_key} = {toml}\n')
    result = run_cli(["run", "--config", str(config)])
    assert result.exit_code == ExitCode.USAGE_ERROR
    assert result.stderr == (
        f"Error: tool.gradcheck.check[0].{spec.config_key}: {words}, got {shown}\n")


def test_max_memory_is_refused_alike_from_the_command_line_and_the_api(run_cli: Run) -> None:
    result = run_cli(["check", "m:f", "--max-memory", "512KiB"])
    assert result.stderr == "Error: --max-memory is 524288 bytes, below 1MiB\n"
    with pytest.raises(OptionError, match=r"^max_memory is 524288 bytes, below 1MiB$"):
        gradcheck.check(lambda x: x, [0.5], max_memory=512 << 10)


def test_a_check_configured_for_hessian_gets_its_kinds_and_second_order() -> None:
    check = _config_check("command", "hessian")
    assert check.options == options_from("hessian", {})
    assert check.options.order == 2 and "hessian" in check.options.kinds


def test_the_users_options_hold_no_run_state_and_a_runs_callbacks_stay_in_its_process() -> None:
    run_state = {f.name for f in dataclasses.fields(CheckSettings)}
    assert run_state == {"keep_blocks", "vectorise", "progress", "phase", "scratch"}
    assert not run_state & FIELDS
    told: list[Any] = []
    settings = CheckSettings(keep_blocks=True, vectorise=False, progress=lambda *a: None,
                           phase=told.append)
    sent = pickle.loads(pickle.dumps(settings))  # as a Job travels to a worker process
    assert (sent.keep_blocks, sent.vectorise, sent.progress, sent.phase) == (True, False, None,
                                                                             None)
    assert settings.phase is not None and settings.progress is not None  # the sender's own
    assert copy.deepcopy(settings).phase is settings.phase  # a copy in this process keeps them


@pytest.mark.parametrize("command", CHECK_COMMANDS)
def test_every_flag_of_a_check_command_is_read_into_its_typed_options(command: str) -> None:
    arguments = ["m:f", "--path", "src", "-i", "[1.0]", "--plot", "pictures", "--format", "json",
                 "-q", "--atol", "0.5"]
    params = cli.commands[command].make_context(command, arguments).params
    options = CommandOptions.from_click({k: v for k, v in params.items() if k != "target"})
    typed = {f.name for f in dataclasses.fields(CommandOptions)}
    assert set(params) - {"target"} - _output_params() - typed - set(options.values) == set()
    assert (options.path, options.input_specs, options.plot_dir) == ("src", ("[1.0]",), "pictures")
    assert (options.output.format.name, options.output.quiet) == ("json", True)
    assert options_from(command, options.values).atol == 0.5
