"""The command group: click's usage errors, Ctrl-C, SIGTERM and gradcheck's own bugs in this
process, each as one `Error:` line (and a JSON error object with --format json) and its exit
code."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any, NoReturn

import click

from gradcheck.cli.formats import FORMATS
from gradcheck.errors import ExitCode, Interrupted


def _requested_format(arguments: list[str]) -> str | None:
    """--format as written on a command line click could not parse."""
    for index, argument in enumerate(arguments):
        if argument == "--format" and index + 1 < len(arguments):
            return arguments[index + 1]
        if argument.startswith("--format="):
            return argument.partition("=")[2]
    return None


def _fail(arguments: list[str], message: str, exit_code: ExitCode) -> NoReturn:
    """One `Error:` line on stderr and, in the --format asked for, its error document (JSON's
    error object) on stdout; then exit with `exit_code`."""
    click.echo(f"Error: {message}", err=True)
    chosen = FORMATS.get(_requested_format(arguments) or "")
    document = None if chosen is None else chosen.error(message, exit_code)
    if document is not None:
        click.echo(document)
    sys.exit(int(exit_code))


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Interrupted("terminated (SIGTERM)")


@contextlib.contextmanager
def _terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the command as Ctrl-C does: workers killed, what finished reported."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class GradcheckGroup(click.Group):
    """Click's own usage errors become one `Error:` line and exit code 2; a bug of gradcheck's
    own in this process, one `Error:` line and exit code 4 (its traceback with --traceback)."""

    def _elsewhere(self, exc: click.UsageError) -> str:
        """For an option this command lacks, the commands that have it."""
        if not isinstance(exc, click.NoSuchOption):
            return ""
        owners = [f"gradcheck {name}" for name, command in sorted(self.commands.items())
                  if any(exc.option_name in param.opts for param in command.params)]
        return f": it is an option of {' and '.join(owners)}" if owners else ""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        arguments = list(kwargs.get("args") or (args[0] if args else sys.argv[1:]))
        try:
            with _terminated_as_interrupt():
                result = super().main(*args, **kwargs)
        except click.UsageError as exc:
            elsewhere = self._elsewhere(exc)
            message = (exc.format_message().rstrip(".") + elsewhere if elsewhere
                       else exc.format_message())
            _fail(arguments, message, ExitCode.USAGE_ERROR)
        except click.Abort as exc:  # click's wrapping of KeyboardInterrupt (Ctrl-C, SIGTERM)
            reason = getattr(exc.__cause__, "reason", Interrupted().reason)
            _fail(arguments, reason, ExitCode.INTERRUPTED)
        except Exception as exc:
            if "--traceback" in arguments:
                import traceback

                click.echo("".join(traceback.format_exception(exc)).rstrip(), err=True)
            from gradcheck.processes.failures import shadowing_note

            message = (f"internal error: {type(exc).__name__}: {exc}{shadowing_note(exc)};"
                       " please report it")
            _fail(arguments, message, ExitCode.INTERNAL_ERROR)
        sys.exit(result if isinstance(result, int) else 0)
