"""The output formats (--format): one class each, saying how a report, a run and an error are
written in it and how they are shown; and the output options every command shares."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import click

from gradcheck.cli.output import annotate_for_github, make_console
from gradcheck.errors import ExitCode, GradcheckError
from gradcheck.report import CheckOutcome, Report, RunResult

# Commands whose table also shows the (small) blocks as matrices.
MATRIX_COMMANDS = ("jacobian", "hessian")


class OutputFormat:
    """A machine-readable document on stdout (or in the -o file only); annotations on stderr."""

    name: str
    # Whether --explain is on by default for vjp in this format.
    explains = True
    # GitHub annotations go to stderr when stdout carries the document.
    annotations_on_stderr = True

    def warm_up(self) -> None:
        """Import what reading and rendering the report needs while the worker starts."""
        import numpy  # noqa: F401 - the report's details hold arrays

        import gradcheck.render.json_format  # noqa: F401

    def keeps_blocks(self, quiet: bool) -> bool:
        """Whether the report shows the Jacobian blocks (the worker then keeps them)."""
        return False

    def shows_progress(self) -> bool:
        """Whether a progress bar may be drawn on a terminal's stderr."""
        return False

    def report(self, report: Report, command: str) -> str:
        raise NotImplementedError

    def run(self, result: RunResult) -> str:
        raise NotImplementedError

    def error(self, message: str, exit_code: ExitCode, target: str | None = None,
              phase: str | None = None) -> str | None:
        """The error document (of TARGET's check, in PHASE), or None when the format has
        none."""
        return None

    def show(self, report: Report, text: str, command: str, output: OutputOptions) -> None:
        if not output.file:  # with -o the document goes to the file only
            click.echo(text, nl=not text.endswith("\n"))
        annotate_for_github(report, err=True)  # stdout carries the document

    def show_run(self, result: RunResult, text: str, output: OutputOptions) -> None:
        if not output.file:
            click.echo(text, nl=not text.endswith("\n"))


class TableFormat(OutputFormat):
    """The rich table on the console, or the text table in the -o file instead."""

    name = "table"
    annotations_on_stderr = False

    def warm_up(self) -> None:
        super().warm_up()
        import gradcheck.render.table  # noqa: F401

    def keeps_blocks(self, quiet: bool) -> bool:
        return not quiet

    def shows_progress(self) -> bool:
        return True

    def report(self, report: Report, command: str) -> str:
        from gradcheck.render.text import render_text

        return render_text(report, show_matrices=command in MATRIX_COMMANDS)

    def run(self, result: RunResult) -> str:
        from gradcheck.render.summary import render_run_text

        return render_run_text(result)

    def show(self, report: Report, text: str, command: str, output: OutputOptions) -> None:
        if output.file:  # the text table went to the file, instead of stdout
            super().show(report, text, command, output)
            return
        from gradcheck.render.table import render_table

        console = make_console(output.no_color)
        console.print(render_table(report, show_matrices=command in MATRIX_COMMANDS,
                                   quiet=output.quiet))
        if not output.quiet and report.blocks:
            from gradcheck.render.heatmap import render_heatmaps

            console.print(render_heatmaps(report, color=console.color_system is not None
                                          and not console.no_color))
        annotate_for_github(report)
        if report.explain is not None and not output.quiet:
            from gradcheck.render.explain import render_explanation

            console.print()
            console.print(render_explanation(report.explain))

    def show_run(self, result: RunResult, text: str, output: OutputOptions) -> None:
        if output.file:
            return
        from gradcheck.render.summary import render_run

        make_console(output.no_color).print(
            render_run(result, quiet=output.quiet, tracebacks=output.traceback))


class JsonFormat(OutputFormat):
    """The JSON report of the contract (docs: DESIGN.md)."""

    name = "json"

    def report(self, report: Report, command: str) -> str:
        from gradcheck.render.json_format import render_json

        return render_json(report)

    def run(self, result: RunResult) -> str:
        from gradcheck.render.json_format import render_run_json
        from gradcheck.runner import outcome_dict

        return render_run_json([outcome_dict(o) for o in result.outcomes], int(result.exit_code))

    def error(self, message: str, exit_code: ExitCode, target: str | None = None,
              phase: str | None = None) -> str | None:
        from gradcheck.render.json_format import render_error_json

        return render_error_json(message, int(exit_code), target, phase)


class JunitFormat(OutputFormat):
    """JUnit XML for CI test reports: one test case per check."""

    name = "junit"
    explains = False

    def report(self, report: Report, command: str) -> str:
        from gradcheck.render.junit import render_junit

        return render_junit([CheckOutcome(report.target, report.target, report, report.exit_code)])

    def run(self, result: RunResult) -> str:
        from gradcheck.render.junit import render_junit

        return render_junit(result.outcomes)

    def error(self, message: str, exit_code: ExitCode, target: str | None = None,
              phase: str | None = None) -> str | None:
        if target is None:
            return None
        from gradcheck.render.junit import render_junit

        return render_junit([CheckOutcome(target, target, None, exit_code, error=message,
                                          phase=phase)])


def report_error(error: GradcheckError, output: OutputOptions, target: str | None,
                 output_file: str | None = None) -> int:
    """The one `Error:` line on stderr, and for JSON or JUnit the error document: into
    `output_file` when given (`-o`: the report goes to the file, on errors too, once the run
    knows it may write there), else stdout."""
    if output.traceback and error.user_traceback:
        click.echo(error.user_traceback.rstrip(), err=True)
    click.echo(f"Error: {error.message}", err=True)
    document = output.format.error(error.message, error.exit_code, target, error.phase)
    if document is not None and output_file:
        from gradcheck.render.files import write_file

        try:
            write_file(output_file, document.encode())
        except OSError as exc:
            click.echo(f"Error: cannot write {output_file}: {exc.strerror or exc}", err=True)
    elif document is not None:
        click.echo(document, nl=not document.endswith("\n"))
    return int(error.exit_code)


TABLE, JSON, JUNIT = TableFormat(), JsonFormat(), JunitFormat()
FORMATS: dict[str, OutputFormat] = {f.name: f for f in (TABLE, JSON, JUNIT)}


@dataclass(frozen=True)
class OutputOptions:
    """--format, -o, -q, --traceback and --no-color: how a command shows what it found."""

    format: OutputFormat = TABLE
    file: str | None = None  # -o: the document goes to this file (and only there)
    quiet: bool = False
    traceback: bool = False  # the user's traceback with an error
    no_color: bool = False

    @classmethod
    def from_click(cls, values: Mapping[str, Any]) -> OutputOptions:
        """From click's values of the output flags (gradcheck.cli.flags.OUTPUT_OPTIONS)."""
        return cls(FORMATS[values["output_format"]], values["output_file"], values["quiet"],
                   values["show_traceback"], values["no_color"])
