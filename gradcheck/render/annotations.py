"""GitHub Actions workflow commands (::error file=...,line=...::message) for located failures."""

from __future__ import annotations

from collections.abc import Sequence

from gradcheck.report import CheckOutcome, Report


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github_annotations(report: Report) -> str:
    lines = []
    seen: set[str] = set()
    for result in report.sorted_checks():
        if not result.failed or not result.location or result.location in seen:
            continue
        seen.add(result.location)
        path, _, line = result.location.rpartition(":")
        if not line.isdigit():
            path, line = result.location, ""
        where = f"file={_escape_property(path)}" + (f",line={line}" if line else "")
        title = _escape_property(f"gradcheck {result.check}")
        lines.append(f"::error {where},title={title}::{_escape_data(result.message)}")
    return "\n".join(lines)


def render_run_annotations(outcomes: Sequence[CheckOutcome]) -> str:
    """`gradcheck run`: each check's located failures, and an error for a check that could not
    run (titled with its name)."""
    lines = []
    for outcome in outcomes:
        if outcome.report is not None:
            text = render_github_annotations(outcome.report)
        else:
            title = _escape_property(f"gradcheck {outcome.name}")
            text = f"::error title={title}::{_escape_data(outcome.error or 'error')}"
        if text:
            lines.append(text)
    return "\n".join(lines)
