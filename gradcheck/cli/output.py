"""What the command line prints and writes: reports in each format, errors, annotations."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from gradcheck.errors import GradcheckError

# Commands whose table also shows the (small) blocks as matrices.
MATRIX_COMMANDS = ("jacobian", "hessian")


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


def report_error(error: GradcheckError, output_format: str, show_traceback: bool,
                 target: str | None, output_file: str | None = None) -> int:
    """The one `Error:` line on stderr, and for JSON or JUnit the error document: into
    `output_file` when given (`-o`: the report goes to the file, on errors too), else stdout."""
    if show_traceback and error.user_traceback:
        click.echo(error.user_traceback.rstrip(), err=True)
    click.echo(f"Error: {error.message}", err=True)
    document = _error_document(error, output_format, target)
    if document is not None and output_file:
        from gradcheck.render.files import write_file

        try:
            write_file(output_file, document.encode())
        except OSError as exc:
            click.echo(f"Error: cannot write {output_file}: {exc.strerror or exc}", err=True)
    elif document is not None:
        click.echo(document, nl=not document.endswith("\n"))
    return int(error.exit_code)


def _error_document(error: GradcheckError, output_format: str, target: str | None) -> str | None:
    if output_format == "json":
        from gradcheck.render.json_format import render_error_json

        return render_error_json(error.message, int(error.exit_code), target, error.phase)
    if output_format == "junit" and target is not None:
        from gradcheck.render.junit import render_junit
        from gradcheck.report import CheckOutcome

        return render_junit([CheckOutcome(target, target, None, error.exit_code,
                                          error=error.message, phase=error.phase)])
    return None


def formatted(report: Any, output_format: str, command: str) -> str:
    if output_format == "json":
        from gradcheck.render.json_format import render_json

        return render_json(report)
    if output_format == "junit":
        from gradcheck.render.junit import render_junit
        from gradcheck.report import CheckOutcome

        return render_junit([CheckOutcome(report.target, report.target, report, report.exit_code)])
    from gradcheck.render.text import render_text

    return render_text(report, show_matrices=command in MATRIX_COMMANDS)


def show(report: Any, text: str, output_format: str, command: str,
          options: dict[str, Any]) -> None:
    if output_format != "table":
        if not options["output_file"]:  # with -o the JSON or JUnit goes to the file only
            click.echo(text, nl=not text.endswith("\n"))
        annotate_for_github(report, err=True)  # stdout carries the JSON or JUnit
        return
    from gradcheck.render.table import render_table

    console = make_console(options["no_color"])
    console.print(render_table(report, show_matrices=command in MATRIX_COMMANDS,
                               quiet=options["quiet"]))
    if not options["quiet"] and report.blocks:
        from gradcheck.render.heatmap import render_heatmaps

        console.print(render_heatmaps(report, color=console.color_system is not None
                                      and not console.no_color))
    annotate_for_github(report)
    if report.explain is not None and not options["quiet"]:
        from gradcheck.render.explain import render_explanation

        console.print()
        console.print(render_explanation(report.explain))


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


def write_artifacts(report: Any, options: dict[str, Any]) -> None:
    """--plot DIR and --save FILE.npz; the paths written, and blocks left out, on stderr."""
    if not (options.get("plot_dir") or options.get("save_file")):
        return
    from gradcheck.render.artifacts import artifact_notes
    from gradcheck.render.artifacts import write_artifacts as write

    written = write(report, options.get("plot_dir"), options.get("save_file"))
    if not options["quiet"]:
        for line in [f"wrote {path}" for path in written] + artifact_notes(report):
            click.echo(line, err=True)
