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


# Below this width the five columns wrap every cell into a narrow strip: each example takes a
# block of its own lines instead.
WIDE_TABLE = 140


def demo_table(results: Sequence[Any], console: Any, verbose: bool) -> tuple[Any, bool]:
    """The table of every example's verdict against the expected one, and whether all
    matched; with `verbose`, each example's full table printed on `console` first. On a
    terminal narrower than WIDE_TABLE, each example is a block: its verdict and name, what it
    shows, then its finding, under a shared indent."""
    from rich.table import Table
    from rich.text import Text

    from gradcheck.demo import DEMO_CASES, finding, fixtures_dir, matches
    from gradcheck.render.table import render_table, status_text

    directory = fixtures_dir()
    title = "gradcheck demo: bundled examples"
    wide = console.width >= WIDE_TABLE
    if wide:
        table = Table(title=title, title_justify="left")
        for column in ("verdict", "example", "what it shows", "finding", "as expected"):
            table.add_column(column)
    else:
        table = Table.grid(padding=(0, 1))
        table.title, table.title_justify = title, "left"
        table.add_column(no_wrap=True)
        table.add_column()
    all_matched = True
    for case, result in zip(DEMO_CASES, results):
        report = result.report
        if report is None:
            all_matched = False
            error = result.error.message if result.error is not None else "no report"
            row = (status_text("error"), case.file, case.story, error, False)
        else:
            failing = {r.check for r in report.checks if r.status in ("fail", "error", "warn")}
            matched = matches(case, report.ok, failing)
            all_matched &= matched
            row = (status_text("pass" if report.ok else "fail"),
                   f"{case.file}:{case.function}", case.story, finding(report, directory),
                   matched)
        verdict, example, story, found, matched = row
        if wide:
            table.add_row(verdict, example, story, Text(found), "yes" if matched else "NO")
        else:
            expected = Text(" as expected" if matched else " NOT as expected",
                            style="" if matched else "bold red")
            table.add_row(verdict, Text(example, style="bold") + expected)
            table.add_row("", Text(story, style="dim"))
            table.add_row("", Text(found))
        if verbose and report is not None:
            console.print(render_table(report, show_matrices=True))
            if report.explain is not None:
                from gradcheck.render.explain import render_explanation

                console.print(render_explanation(report.explain))
    return table, all_matched
