"""The commands: check, jacobian, vjp, hessian, run, demo; the only place that exits."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from gradcheck.cli.command_options import CommandOptions
from gradcheck.cli.flags import (
    check_options,
    explain_option,
    input_options,
    option,
    output_options,
    run_timeout_option,
    upstream_option,
)
from gradcheck.cli.formats import OutputFormat, OutputOptions, report_error
from gradcheck.cli.group import GradcheckGroup
from gradcheck.cli.output import annotate_run_for_github, make_console, write_and_list_artifacts
from gradcheck.cli.paths import guard_replay, guard_run, guard_single
from gradcheck.cli.version import version_option
from gradcheck.errors import (
    ExitCode,
    GradcheckError,
    InputError,
    Interrupted,
    LoadError,
    UsageError,
)
from gradcheck.options import SPECS
from gradcheck.render.files import write_file

if TYPE_CHECKING:
    from gradcheck.check_settings import CheckSettings
    from gradcheck.options import CheckOptions

# `-k` that matches nothing lists this many of the configured checks' names.
LISTED_NAMES = 10
# The commands that check one TARGET (made by _checking_command).
CHECKING: set[str] = set()


@click.group(cls=GradcheckGroup, context_settings={"help_option_names": ["-h", "--help"]})
@version_option
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Diagnose TensorFlow gradients: Jacobians, VJPs, custom_gradient contracts, graph breaks.

    Exit codes: 0 all checks passed, 1 a check failed, 2 usage/loading/input error,
    3 the function itself raised (or hit --timeout), 4 gradcheck or TensorFlow itself failed,
    130 interrupted (Ctrl-C or SIGTERM; what had finished is still reported).
    Each check runs in a worker process that imports TensorFlow.
    """
    if ctx.invoked_subcommand in CHECKING:  # [tool.gradcheck]'s path and timeout, as for run
        from pathlib import Path

        from gradcheck.load.config import command_defaults

        try:
            defaults = command_defaults(Path.cwd())
        except UsageError as error:
            raise click.UsageError(error.message) from error
        ctx.default_map = {ctx.invoked_subcommand: {
            SPECS[name].parameter: value for name, value in defaults.items()}}


# What TARGET is, with examples, under each checking command's --help.
TARGET_HELP = """TARGET is the function to check: path/to/file.py:function or
package.module:function (also module:Class.method, a Keras layer or model, or a zero-argument
factory returning one; a SavedModel directory or a .keras file). Its arguments come from -i
(repeatable, in order), --shape, --inputs MOD:ATTR, or a `<function>_inputs` value in its
module.

\b
Examples:
  gradcheck {command} my_ops.py:f -i '[1.0, -2.0, 3.0]'
  gradcheck {command} my_ops.py:f --shape 1000
  gradcheck {command} mypkg.layers:attention -i q=q.npy -i k=k.npy
"""


def _checking_command(function: Any) -> Any:
    """A command that checks one TARGET: its --help says what TARGET is, with examples."""
    CHECKING.add(function.__name__)
    target_help = TARGET_HELP.format(command=function.__name__)
    return cli.command(help=f"{inspect.cleandoc(function.__doc__)}\n\n{target_help}")(function)


def _validated(command: str, target: str, options: CommandOptions
               ) -> tuple[CheckOptions, CheckSettings]:
    """Every check of the command line that needs no TensorFlow, before a worker starts: the
    options, the TARGET's form, the output paths, shapes; the CheckOptions, and the run's
    settings (the blocks are kept when a picture, --save or the table shows them)."""
    from gradcheck.check_settings import CheckSettings
    from gradcheck.load.inputs import check_shape_fits
    from gradcheck.options import options_from
    from gradcheck.processes import supervisor
    from gradcheck.targets.modules import split_spec
    from gradcheck.targets.saved_files import validate_target

    validate_target(target)  # a usage error answers at once, without waiting for TensorFlow
    if options.against:
        try:
            validate_target(options.against)
        except LoadError as exc:
            raise InputError(f"--against {options.against}: {exc.message}") from exc
    if options.inputs_attr:
        try:
            split_spec(options.inputs_attr)
        except LoadError as exc:
            raise InputError(f"--inputs {options.inputs_attr}: {exc.message}") from exc
    check_options = options_from(command, options.values,
                                 explain=_explain_wanted(command, options))
    settings = CheckSettings(keep_blocks=bool(options.plot_dir or options.save_file)
                           or options.output.format.keeps_blocks(options.output.quiet))
    guard_single(target, options)
    for shape in options.shapes:
        check_shape_fits(shape, supervisor.memory_cap(check_options.max_memory))
    return check_options, settings


def _check_single(command: str, target: str, options: CommandOptions) -> None:
    output, output_format = options.output, options.output.format
    # -o gets the error document too, once it is known to be a path the run may write.
    error_file: str | None = None
    try:
        check_options, settings = _validated(command, target, options)
        error_file = output.file
        from gradcheck.processes import supervisor

        supervisor.prestart(1)  # the worker imports TensorFlow while this process gets ready
        from gradcheck.pipeline import check_request

        if options.plot_dir:
            from gradcheck.render.artifacts import require_plotting

            require_plotting()
        job = supervisor.Job(check_request, (options.request(target),), check_options,
                            name=target.rpartition(":")[2], target=target,
                            timeout=check_options.timeout,
                            memory_limit=supervisor.memory_cap(check_options.max_memory),
                            settings=settings)
        output_format.warm_up()
        with _progress_bar(output_format, output.no_color) as progress:
            events = supervisor.Events(
                progress=None if progress is None else lambda _, *done: progress(*done),
                notice=lambda _, message: click.echo(f"Error: {message}", err=True))
            result = supervisor.run_jobs([job], events=events)[0]
        if result.error is not None:
            raise result.error
        report = result.report
        assert report is not None
        text = output_format.report(report, command)
        if output.file:
            write_file(output.file, text.encode())
        write_and_list_artifacts(report, options.plot_dir, options.save_file, output.quiet)
    except GradcheckError as error:
        sys.exit(report_error(error, output, target, error_file))
    output_format.show(report, text, command, output)
    sys.exit(int(report.exit_code))


def _progress_bar(output_format: OutputFormat, no_color: bool) -> Any:
    """A rich bar on stderr for long work: only for tables, only on a terminal."""
    if not output_format.shows_progress() or not sys.stderr.isatty():
        return contextlib.nullcontext()
    from gradcheck.render.progress import DelayedProgress

    return DelayedProgress(make_console(no_color, stderr=True))


def _explain_wanted(command: str, options: CommandOptions) -> bool:
    """--explain/--no-explain; by default on for vjp, in table (and JSON) format."""
    if options.explain is not None:
        return options.explain
    return command == "vjp" and not options.output.quiet and options.output.format.explains


@_checking_command
@input_options
@check_options
@output_options
def jacobian(target: str, **options: Any) -> None:
    """Autodiff Jacobian vs finite differences, block by block."""
    _check_single("jacobian", target, CommandOptions.from_click(options))


@_checking_command
@input_options
@upstream_option
@check_options
@output_options
@explain_option
def vjp(target: str, **options: Any) -> None:
    """tape.gradient(y, x, output_gradients=u) vs uᵀJ (autodiff and finite differences)."""
    _check_single("vjp", target, CommandOptions.from_click(options))


@_checking_command
@input_options
@upstream_option
@check_options
@output_options
def check(target: str, **options: Any) -> None:
    """Every check gradcheck knows; the one to use in CI."""
    _check_single("check", target, CommandOptions.from_click(options))


@_checking_command
@input_options
@check_options
@output_options
def hessian(target: str, **options: Any) -> None:
    """The Hessian of a scalar f (Hessian-vector products for large inputs) vs finite
    differences of its gradient, block by block."""
    _check_single("hessian", target, CommandOptions.from_click(options))


@cli.command()
@click.argument("snapshot", metavar="SNAPSHOT")
@click.option("--trust", is_flag=True,
              help="A snapshot you made: import the modules it names and load its Lambda"
                   " layers (never for a snapshot you received).")
@click.option("--model", "model_spec", metavar="MODULE:FUNCTION",
              help="A function that builds the model (subclassed, tf.Module, Lambda layers);"
                   " the snapshot's weights are put into it.")
@click.option("--loss", "loss_spec", metavar="MODULE:FUNCTION",
              help="The loss as the training step computed it, loss(model, *batch), or as"
                   " Keras calls a compiled loss, loss(y_true, y_pred).")
@click.option("--path", default=".", show_default=True, metavar="DIR",
              help="Put DIR first on sys.path to import --model, --loss (and, with --trust,"
                   " the modules the snapshot names).")
@click.option("--mode", type=click.Choice(("fast", "full")), default=None,
              help="Every check of the weights, not only what the trigger asks (a non-finite"
                   " step: the op that made it); full: the whole Jacobian (slow for a model).")
@option(SPECS["timeout"])
@click.option("--write-reports", is_flag=True,
              help="Also store report.json and report.txt in the snapshot (where it has none).")
@output_options
def replay(snapshot: str, trust: bool, model_spec: str | None, loss_spec: str | None,
           path: str, mode: str | None, timeout: float | None, write_reports: bool,
           **output_flags: Any) -> None:
    """The diagnosis of a snapshot that gradcheck.Watch wrote, again, in a fresh process. It
    runs no code the snapshot names unless you pass --trust."""
    output = OutputOptions.from_click(output_flags)
    output_format = output.format
    error_file: str | None = None  # -o gets the error document once the path is checked
    try:
        from pathlib import Path

        from gradcheck.processes import supervisor
        from gradcheck.training.replay import Replay, check_snapshot
        from gradcheck.training.snapshot import read_snapshot
        from gradcheck.training.step import step_options

        manifest = read_snapshot(snapshot)  # missing, partial or altered: exit 2 at once
        guard_replay(Path(snapshot), output.file, model_spec, loss_spec, path)
        error_file = output.file
        check_options = step_options(manifest.trigger.kind, mode, timeout)
        supervisor.prestart(1)
        job = supervisor.Job(check_snapshot,
                            (Replay(snapshot, path, trust, model_spec, loss_spec),),
                            check_options, name="training loss", target=snapshot,
                            timeout=timeout,
                            memory_limit=supervisor.memory_cap(check_options.max_memory))
        output_format.warm_up()
        result = supervisor.run_jobs([job])[0]
        if result.error is not None:
            raise result.error
        report = result.report
        assert report is not None
        text = output_format.report(report, "replay")
        if output.file:
            write_file(output.file, text.encode())
        if write_reports:
            from gradcheck.training.snapshot import HEALTH_FILE, load_arrays, write_report_files
            from gradcheck.training.snapshot_writer import report_files

            health = (load_arrays(Path(snapshot) / HEALTH_FILE)
                      if HEALTH_FILE in manifest.files else None)
            write_report_files(Path(snapshot), report_files(report, None, health))
    except GradcheckError as error:
        sys.exit(report_error(error, output, snapshot, error_file))
    output_format.show(report, text, "replay", output)
    sys.exit(int(report.exit_code))


@cli.command()
@click.option("--config", "config_file", metavar="FILE",
              help="TOML file with [tool.gradcheck] (default: the nearest pyproject.toml).")
@click.option("-k", "pattern", metavar="PATTERN",
              help="Only checks whose name contains PATTERN (a glob if it has * ? [).")
@run_timeout_option
@click.option("-j", "--jobs", "jobs", default="1", show_default=True, metavar="N|auto",
              help="Checks run in N worker processes at once (auto: one per idle core).")
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Pictures of the failing checks' Jacobian blocks, in DIR/<check>/.")
@output_options
def run(config_file: str | None, pattern: str | None, timeout: float | None, jobs: str,
        plot_dir: str | None, **output_flags: Any) -> None:
    """Run the checks configured in [tool.gradcheck], for CI (exit code: the worst check's)."""
    from gradcheck.load.config import load_config
    from gradcheck.load.timeout import validate_timeout
    from gradcheck.processes.trees import available_memory
    from gradcheck.runner import cap_workers, parse_jobs, run_all, usable_cores

    output = OutputOptions.from_click(output_flags)
    output_format = output.format
    started = time.monotonic()
    error_file: str | None = None  # -o gets the error document once the path is checked
    try:
        validate_timeout(timeout)
        workers = parse_jobs(jobs)
        config = load_config(config_file)
        selected = _selected(config, pattern)
        limit = timeout if timeout is not None else config.timeout
        guard_run(config, selected, output.file, plot_dir)
        error_file = output.file
        workers, note = cap_workers(workers, len(selected), usable_cores(), available_memory())
        if note is not None and not output.quiet:
            click.echo(f"note: {note}", err=True)
        from gradcheck.processes import supervisor

        supervisor.prestart(workers)
        output_format.warm_up()
        if plot_dir:
            from gradcheck.render.artifacts import require_plotting

            require_plotting()
        try:
            with _run_progress(len(selected), output) as progress:
                result = run_all(selected, limit, progress, workers, notice=lambda check, msg:
                                 click.echo(f"Error: {check.name}: {msg}", err=True),
                                 keep_blocks=plot_dir is not None)
        except Interrupted as stop:  # Ctrl-C or SIGTERM: what finished is still reported
            result = stop.finished  # a RunResult, from run_all
        result = dataclasses.replace(result, wall_seconds=time.monotonic() - started)
        text = output_format.run(result)
        if output.file:
            write_file(output.file, text.encode())
        if plot_dir:
            from gradcheck.render.artifacts import write_run_artifacts

            for path in write_run_artifacts(result, plot_dir):
                click.echo(f"wrote {path}", err=True)
    except GradcheckError as error:
        sys.exit(report_error(error, output, None, error_file))
    output_format.show_run(result, text, output)
    annotate_run_for_github(result, err=output_format.annotations_on_stderr or bool(output.file))
    if result.exit_code == ExitCode.INTERRUPTED:
        unfinished = [o for o in result.outcomes if o.exit_code == ExitCode.INTERRUPTED]
        reason = (unfinished[0].error or "").removeprefix("not finished: ")
        click.echo(f"Error: {reason}: {len(result.outcomes) - len(unfinished)} of"
                   f" {len(result.outcomes)} checks finished", err=True)
    sys.exit(int(result.exit_code))


def _selected(config: Any, pattern: str | None) -> Any:
    """The configured checks -k chooses; none is a usage error that names some."""
    selected = config.select(pattern)
    if not selected:
        names = [check.name for check in config.checks]
        listed = ", ".join(names[:LISTED_NAMES]) + (
            f" and {len(names) - LISTED_NAMES} more" if len(names) > LISTED_NAMES else "")
        raise UsageError(f"-k {pattern!r} matches none of the configured checks ({listed})")
    return selected


@contextlib.contextmanager
def _run_progress(total: int, output: OutputOptions) -> Iterator[Any]:
    """A transient bar (checks done, checks running) on a terminal's stderr; None elsewhere."""
    console = make_console(output.no_color, stderr=True)
    if output.quiet or not console.is_terminal:
        yield None
        return
    from gradcheck.render.progress import RunProgress

    with RunProgress(console, total) as progress:
        yield progress


@cli.command()
@click.option("--no-color", is_flag=True, help="No colours (NO_COLOR works too).")
@click.option("-v", "--verbose", is_flag=True, help="Show every example's full table.")
@click.option("-q", "--quiet", is_flag=True, help="Only the verdict line.")
def demo(no_color: bool, verbose: bool, quiet: bool) -> None:
    """Run the bundled examples and show that each gets the verdict it should."""
    from gradcheck.cli.demo_table import demo_jobs, demo_table
    from gradcheck.demo import common_error
    from gradcheck.processes import supervisor

    supervisor.prestart(1)
    console = make_console(no_color)
    results = supervisor.run_jobs(demo_jobs(verbose))
    stopped = common_error([result.error for result in results])
    if stopped is not None:
        sys.exit(report_error(stopped, OutputOptions(), None))
    table, all_matched = demo_table(results, console, verbose)
    if not quiet:
        console.print(table)
    console.print(
        "every example got its expected verdict" if all_matched
        else "some examples did not get their expected verdict",
        style="bold green" if all_matched else "bold red",
    )
    sys.exit(int(ExitCode.OK if all_matched else ExitCode.CHECK_FAILED))


def main() -> None:
    """Console-script entry point."""
    cli()
