"""`gradcheck demo`'s checks of the bundled examples and its table of their verdicts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gradcheck.processes.protocol import Job


def demo_jobs(verbose: bool) -> list[Job]:
    """One check of each bundled example, as its command would run it."""
    from gradcheck.demo import DEMO_CASES, fixtures_dir, upstream_specs
    from gradcheck.options import DEFAULT_MAX_MEMORY, options_from
    from gradcheck.pipeline import TargetRequest, check_request
    from gradcheck.processes import supervisor

    directory = fixtures_dir()
    return [Job(
        check_request,
        (TargetRequest(target=f"{directory / case.file}:{case.function}", path=str(directory),
                       upstream_specs=upstream_specs(case, directory)),),
        options_from(case.command, {}, explain=verbose and case.command == "vjp"),
        name=case.function, target=f"{case.file}:{case.function}",
        memory_limit=supervisor.memory_cap(DEFAULT_MAX_MEMORY)) for case in DEMO_CASES]


def demo_table(results: Sequence[Any], console: Any, verbose: bool) -> tuple[Any, bool]:
    """The table of every example's verdict against the expected one, and whether all
    matched; with `verbose`, each example's full table printed on `console` first."""
    from rich.table import Table
    from rich.text import Text

    from gradcheck.demo import DEMO_CASES, finding, fixtures_dir, matches
    from gradcheck.render.table import render_table, status_text

    directory = fixtures_dir()
    table = Table(title="gradcheck demo: bundled examples", title_justify="left")
    for column in ("verdict", "example", "what it shows", "finding", "as expected"):
        table.add_column(column)
    all_matched = True
    for case, result in zip(DEMO_CASES, results):
        report = result.report
        if report is None:
            all_matched = False
            message = result.error.message if result.error is not None else "no report"
            table.add_row(status_text("error"), case.file, case.story, Text(message), "no")
            continue
        failing = {r.check for r in report.checks if r.status in ("fail", "error", "warn")}
        matched = matches(case, report.ok, failing)
        all_matched &= matched
        table.add_row(status_text("pass" if report.ok else "fail"), f"{case.file}:{case.function}",
                      case.story, Text(finding(report, directory)), "yes" if matched else "NO")
        if verbose:
            console.print(render_table(report, show_matrices=True))
            if report.explain is not None:
                from gradcheck.render.explain import render_explanation

                console.print(render_explanation(report.explain))
    return table, all_matched
