"""`gradcheck --version`: gradcheck's version and the Python, TensorFlow and Keras it runs
with, read from the installed distributions' metadata, so that TensorFlow is never imported."""

from __future__ import annotations

import platform
import sys
from collections.abc import Iterable
from importlib import metadata
from typing import Any

import click

from gradcheck.report import VERSION

# The distributions that install the `tensorflow` package, and those that install a Keras.
TENSORFLOWS = ("tensorflow", "tensorflow-cpu", "tensorflow-macos", "tensorflow-intel",
               "tf-nightly", "tf-nightly-cpu")
KERASES = ("keras", "tf-keras")


def _installed(names: Iterable[str]) -> list[str]:
    """`name version` of each distribution installed here."""
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return found


def version_text() -> str:
    tensorflow = ", ".join(_installed(TENSORFLOWS)) or "not installed (see README: Install)"
    keras = ", ".join(_installed(KERASES)) or "not installed"
    return (f"gradcheck {VERSION}\n"
            f"Python {platform.python_version()} ({sys.executable})\n"
            f"TensorFlow: {tensorflow}\n"
            f"Keras: {keras}")


def _show_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_text())
        ctx.exit()


def version_option(function: Any) -> Any:
    return click.option("--version", is_flag=True, expose_value=False, is_eager=True,
                        callback=_show_version,
                        help="Show the versions of gradcheck, Python, TensorFlow and Keras, and"
                             " exit.")(function)
