"""JUnit XML: one testcase per check kind per target, failures with message and location."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from gradcheck.report import STATUS_RANK, CheckResult, Report


def _testcase(suite: ET.Element, classname: str, kind: str,
              results: Sequence[CheckResult]) -> None:
    case = ET.SubElement(suite, "testcase", classname=classname, name=kind, time="0")
    worst = min(results, key=lambda r: STATUS_RANK[r.status])
    lines = [
        f"[{r.status}] {r.input or '-'} -> {r.output or '-'}"
        f"{' at ' + r.location if r.location else ''}: {r.message}"
        for r in results
    ]
    if worst.status in ("fail", "error"):
        tag = "failure" if worst.status == "fail" else "error"
        element = ET.SubElement(case, tag, message=worst.message, type=worst.check)
        element.text = "\n".join(lines)
    elif worst.status == "skip" and all(r.status == "skip" for r in results):
        ET.SubElement(case, "skipped", message=worst.message)
    else:
        ET.SubElement(case, "system-out").text = "\n".join(lines)


def render_junit(reports: Sequence[tuple[str, Report | None, str | None]]) -> str:
    """(name, report or None, error message or None) per configured check."""
    root = ET.Element("testsuites", name="gradcheck")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for name, report, error in reports:
        suite = ET.SubElement(root, "testsuite", name=name)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        if report is None:
            case = ET.SubElement(suite, "testcase", classname=name, name="load", time="0")
            ET.SubElement(case, "error", message=error or "error", type="error").text = error
            counts.update(tests=1, errors=1)
        else:
            kinds: dict[str, list[CheckResult]] = {}
            for result in report.checks:
                kinds.setdefault(result.check, []).append(result)
            for kind, results in kinds.items():
                _testcase(suite, name, kind, results)
                counts["tests"] += 1
                statuses = {r.status for r in results}
                if "error" in statuses:
                    counts["errors"] += 1
                elif "fail" in statuses:
                    counts["failures"] += 1
                elif statuses == {"skip"}:
                    counts["skipped"] += 1
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
