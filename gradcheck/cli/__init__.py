"""The command line: a thin layer over the pipeline that prints, writes files and exits
(commands, group: errors and signals), with its options (flags), what it prints (output)
and the checks on the paths it writes (paths)."""

from gradcheck.cli.commands import cli, main

__all__ = ["cli", "main"]
