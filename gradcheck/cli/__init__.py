"""The command line: a thin layer over the pipeline that prints, writes files and exits
(commands), with its options (flags) and what it prints (output)."""

from gradcheck.cli.commands import cli, main

__all__ = ["cli", "main"]
