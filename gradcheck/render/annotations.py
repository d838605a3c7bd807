"""GitHub Actions workflow commands (::error file=...,line=...::message) for located failures."""

from __future__ import annotations

from collections.abc import Sequence

from gradcheck.evidence import Location
from gradcheck.report import CheckOutcome, Report


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def error_annotation(title: str, message: str, path: str | None = None,
                     line: int | str | None = None) -> str:
    """One `::error` command, escaped as GitHub reads it; PATH and LINE when known."""
    where = [f"file={_escape_property(path)}"] if path is not None else []
    if line:
        where.append(f"line={line}")
    where.append(f"title={_escape_property(title)}")
    return f"::error {','.join(where)}::{_escape_data(message)}"


def render_github_annotations(report: Report) -> str:
    lines = []
    seen: set[Location] = set()
    for result in report.sorted_checks():
        if not result.failed or not result.location or result.location in seen:
            continue
        seen.add(result.location)
        lines.append(error_annotation(f"gradcheck {result.check}", result.message,
                                      result.location.path, result.location.line))
    return "\n".join(lines)


def render_run_annotations(outcomes: Sequence[CheckOutcome]) -> str:
    """`gradcheck run`: each check's located failures, and an error for a check that could not
    run (titled with its name)."""
    lines = []
    for outcome in outcomes:
        if outcome.report is not None:
            text = render_github_annotations(outcome.report)
        else:
            text = error_annotation(f"gradcheck {outcome.name}", outcome.error or "error")
        if text:
            lines.append(text)
    return "\n".join(lines)
