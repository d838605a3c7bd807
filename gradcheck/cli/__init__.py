"""The command line: a thin layer over the pipeline that prints, writes files and exits
(commands, group: errors and signals), with its options (flags), what it prints (output),
the checks on the paths it writes (paths) and what --version names (version)."""

try:
    from gradcheck.cli.commands import cli, main
except (ImportError, AttributeError) as exc:  # a user's math.py, say, on the path
    from gradcheck.shadowing import explain_import_failure

    explain_import_failure(exc)
    raise

__all__ = ["cli", "main"]
