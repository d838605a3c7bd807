"""The command line's options, grouped as the commands share them, and their validation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from gradcheck.errors import UsageError
from gradcheck.options import DTYPES, MAX_MEMORY, MIN_MEMORY, MODES

FORMATS = ("table", "json", "junit")


def input_options(function: Callable[..., Any]) -> Callable[..., Any]:
    for decorator in reversed((
        click.argument("target"),
        click.option("-i", "--input", "input_specs", multiple=True, metavar="VALUE",
                     help="An argument: .npy, .npz, or a literal like '[1.0, 2.0]';"
                          " NAME=VALUE for a keyword. Repeatable, in order."),
        click.option("--shape", "shapes", multiple=True, metavar="2,3",
                     help="Random normal argument of this shape (repeatable)."),
        click.option("--inputs", "inputs_attr", metavar="MOD:ATTR",
                     help="Arguments from a value or zero-argument callable."),
        click.option("--path", default=".", show_default=True,
                     help="Directory put first on sys.path."),
        click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0),
                     help="Seed for --shape and random upstreams."),
        click.option("--no-instrument", "no_instrument", is_flag=True,
                     help="Do not observe the tf.custom_gradient functions f calls."),
    )):
        function = decorator(function)
    return function


def check_options(function: Callable[..., Any]) -> Callable[..., Any]:
    for decorator in reversed((
        click.option("--atol", type=float, help="Absolute tolerance (default per dtype)."),
        click.option("--rtol", type=float, help="Relative tolerance (default per dtype)."),
        click.option("--eps", type=float,
                     help="Finite-difference step (default: eps^(1/3) x element scale)."),
        click.option("--mode", type=click.Choice(MODES), default="auto",
                     show_default=True),
        click.option("--probes", type=int, default=8, show_default=True,
                     help="Random directions in fast mode."),
        click.option("--dtype", type=click.Choice(DTYPES),
                     default="auto", show_default=True),
        click.option("--surrogate", "surrogates", multiple=True, metavar="NAME",
                     help="A custom_gradient that deliberately differs from the true gradient"
                          " (straight-through, clipping): its mismatch is a warning."),
        click.option("--max-memory", "max_memory", default="1GiB", show_default=True,
                     help="Memory budget for batched evaluations and Jacobians."),
        click.option("--timeout", type=float, metavar="SECONDS",
                     help="Kill the check (exit code 3) if it runs longer; TensorFlow's"
                          " start-up does not count."),
        click.option("--wrt", default="all", show_default=True,
                     metavar="inputs|variables|all|NAME",
                     help="Sources: the arguments, the trainable variables f reads, both, or"
                          " one of them by name (e.g. dense/kernel)."),
        click.option("--training", is_flag=True,
                     help="Call Keras layers and models with training=True."),
        click.option("--order", type=click.IntRange(1, 2), default=1, show_default=True,
                     help="2 adds the second-order check (the derivative of the VJP)."),
        click.option("--compiled/--no-compiled", default=True, show_default=True,
                     help="Also compare the VJP under tf.function and XLA (check only)."),
        click.option("--plot", "plot_dir", type=click.Path(file_okay=False), metavar="DIR",
                     help="A PNG and a JSON sidecar per Jacobian block in DIR."),
        click.option("--save", "save_file", type=click.Path(dir_okay=False),
                     metavar="FILE.npz", help="The blocks' arrays, VJPs and upstreams."),
    )):
        function = decorator(function)
    return function


def output_options(function: Callable[..., Any]) -> Callable[..., Any]:
    for decorator in reversed((
        click.option("--format", "output_format", type=click.Choice(FORMATS), default="table",
                     show_default=True),
        click.option("-o", "--output", "output_file", type=click.Path(dir_okay=False),
                     help="Also write the report (in --format) to FILE."),
        click.option("-q", "--quiet", is_flag=True, help="Only the summary line."),
        click.option("--traceback", "show_traceback", is_flag=True,
                     help="Show the user's traceback for errors."),
        click.option("--no-color", is_flag=True, help="No colours (NO_COLOR works too)."),
    )):
        function = decorator(function)
    return function


def upstream_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--upstream", "upstream_specs", multiple=True, metavar="U",
        help="Upstream per output: .npy/.npz, literal, 'ones' or 'random' (default).",
    )(function)


def parse_memory(text: str) -> int:
    units = {"": 1, "B": 1, "K": 1 << 10, "KB": 1000, "KIB": 1 << 10, "M": 1 << 20,
             "MB": 10**6, "MIB": 1 << 20, "G": 1 << 30, "GB": 10**9, "GIB": 1 << 30,
             "T": 1 << 40, "TB": 10**12, "TIB": 1 << 40}
    cleaned = text.strip().upper()
    number = cleaned.rstrip("BKMGTI")
    unit = cleaned[len(number):]
    try:
        value = float(number) * units[unit]
    except (ValueError, KeyError) as exc:
        raise UsageError(f"--max-memory {text!r} must be a size like 512MiB or 2GiB") from exc
    if not value >= MIN_MEMORY:
        raise UsageError(f"--max-memory {text!r} is below 1MiB")
    if value > MAX_MEMORY:
        raise UsageError(f"--max-memory {text!r} is more than 1PiB")
    return int(value)
