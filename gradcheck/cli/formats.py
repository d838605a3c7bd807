"""The output formats (--format): one class each, saying how a report, a run and an error are
written in it and how they are shown."""

from __future__ import annotations

from typing import Any

import click

from gradcheck.cli.output import annotate_for_github, make_console
from gradcheck.errors import GradcheckError
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

    def error(self, error: GradcheckError, target: str | None) -> str | None:
        """The error document, or None when the format has none."""
        return None

    def show(self, report: Report, text: str, command: str, options: dict[str, Any]) -> None:
        if not options["output_file"]:  # with -o the document goes to the file only
            click.echo(text, nl=not text.endswith("\n"))
        annotate_for_github(report, err=True)  # stdout carries the document

    def show_run(self, result: RunResult, text: str, options: dict[str, Any]) -> None:
        if not options["output_file"]:
            click.echo(text, nl=not text.endswith("\n"))



class TableFormat(OutputFormat):
    """The rich table on the console (the text table in the -o file)."""

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

    def show(self, report: Report, text: str, command: str, options: dict[str, Any]) -> None:
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

    def show_run(self, result: RunResult, text: str, options: dict[str, Any]) -> None:
        from gradcheck.render.summary import render_run

        make_console(options["no_color"]).print(
            render_run(result, quiet=options["quiet"], tracebacks=options["show_traceback"]))


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

    def error(self, error: GradcheckError, target: str | None) -> str | None:
        from gradcheck.render.json_format import render_error_json

        return render_error_json(error.message, int(error.exit_code), target, error.phase)


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

    def error(self, error: GradcheckError, target: str | None) -> str | None:
        if target is None:
            return None
        from gradcheck.render.junit import render_junit

        return render_junit([CheckOutcome(target, target, None, error.exit_code,
                                          error=error.message, phase=error.phase)])


def report_error(error: GradcheckError, output_format: OutputFormat, show_traceback: bool,
                 target: str | None, output_file: str | None = None) -> int:
    """The one `Error:` line on stderr, and for JSON or JUnit the error document: into
    `output_file` when given (`-o`: the report goes to the file, on errors too), else stdout."""
    if show_traceback and error.user_traceback:
        click.echo(error.user_traceback.rstrip(), err=True)
    click.echo(f"Error: {error.message}", err=True)
    document = output_format.error(error, target)
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
