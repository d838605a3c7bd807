"""What the command line prints besides the report itself: the console, annotations, artifacts."""

from __future__ import annotations

import os
import sys
from typing import Any

import click


def make_console(no_color: bool, stderr: bool = False) -> Any:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Rich assumes 80 columns off a terminal; logs and CI artefacts read better wider.
    width = None if stream.isatty() else _columns()
    return Console(stderr=stderr, no_color=no_color or "NO_COLOR" in os.environ,
                   highlight=False, width=width)


def _columns() -> int:
    """$COLUMNS when it is a sensible width (COLUMNS=abc is not), else 160."""
    text = os.environ.get("COLUMNS", "")
    return int(text) if text.isdigit() and 20 <= int(text) <= 10_000 else 160


def annotate_for_github(report: Any, err: bool = False) -> None:
    """Under GitHub Actions, failures with a location become ::error annotations."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return
    from gradcheck.render.annotations import render_github_annotations

    text = render_github_annotations(report)
    if text:
        click.echo(text, err=err)


def annotate_run_for_github(result: Any, err: bool = False) -> None:
    """`gradcheck run` under GitHub Actions: every check's failures as ::error annotations."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return
    from gradcheck.render.annotations import render_run_annotations

    text = render_run_annotations(result.outcomes)
    if text:
        click.echo(text, err=err)


def write_and_list_artifacts(report: Any, plot_dir: str | None, save_file: str | None,
                             quiet: bool) -> None:
    """--plot DIR and --save FILE.npz; the paths written, and blocks left out, on stderr
    (unless `quiet`)."""
    if not (plot_dir or save_file):
        return
    from gradcheck.render.artifacts import artifact_notes, write_artifacts

    written = write_artifacts(report, plot_dir, save_file)
    if not quiet:
        for line in [f"wrote {path}" for path in written] + artifact_notes(report):
            click.echo(line, err=True)
