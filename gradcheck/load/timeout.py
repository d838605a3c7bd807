"""Time limits on checks: validating --timeout. The limit itself is enforced by the parent of
the worker process that runs the check (gradcheck.processes.supervisor), which kills it at the
deadline."""

from __future__ import annotations

from gradcheck.options import OptionError, option_problem


def validate_timeout(seconds: float | None, flag: str = "--timeout") -> None:
    """The timeout option's own rule, for a limit that is not one check's (run's --timeout)."""
    problem = option_problem("timeout", seconds)
    if problem is not None:
        raise OptionError("timeout", problem, flag)
