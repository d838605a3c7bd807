"""JUnit XML (the Jenkins/Surefire junit-10 schema): one testcase per check kind per check."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gradcheck.report import STATUS_RANK, CheckResult, Status

if TYPE_CHECKING:
    from gradcheck.report import CheckOutcome

# Characters XML 1.0 cannot carry at all (a user's exception text may hold them).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
COUNTS = ("tests", "failures", "errors", "skipped")


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _line(result: CheckResult) -> str:
    where = f" at {result.location}" if result.location else ""
    pair = ""
    if result.input or result.output:
        pair = f" {result.input or '-'} -> {result.output or '-'}"
    return _clean(f"[{result.status}]{pair}{where}: {result.message}")


def _headline(result: CheckResult) -> str:
    return _clean(f"{result.location}: {result.message}" if result.location else result.message)


def _testcase(suite: ET.Element, classname: str, kind: str,
              results: Sequence[CheckResult]) -> str:
    """Add the testcase; return its outcome: passed, failures, errors or skipped."""
    case = ET.SubElement(suite, "testcase", name=kind, classname=classname)
    worst = min(results, key=lambda r: STATUS_RANK[r.status])
    text = "\n".join(_line(r) for r in sorted(results, key=lambda r: STATUS_RANK[r.status]))
    if worst.status in ("fail", "error"):
        tag = "failure" if worst.status == Status.FAIL else "error"
        ET.SubElement(case, tag, message=_headline(worst), type=kind).text = text
        return "failures" if tag == "failure" else "errors"
    if worst.status == Status.SKIP:
        ET.SubElement(case, "skipped", message=_headline(worst))
        return "skipped"
    ET.SubElement(case, "system-out").text = text
    return "passed"


def _suite(root: ET.Element, outcome: CheckOutcome) -> dict[str, int]:
    suite = ET.SubElement(root, "testsuite", name=_clean(outcome.name))
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="target", value=_clean(outcome.target))
    ET.SubElement(properties, "property", name="exit_code", value=str(int(outcome.exit_code)))
    phase = outcome.phase  # where a crash or time-out happened
    if phase:
        ET.SubElement(properties, "property", name="phase", value=_clean(phase))
    counts = dict.fromkeys(COUNTS, 0)
    if outcome.report is None:
        case = ET.SubElement(suite, "testcase", name="setup" if outcome.exit_code == 2
                             else "evaluate", classname=_clean(outcome.name))
        message = _clean(outcome.error or "error")
        ET.SubElement(case, "error", message=message,
                      type=f"exit code {int(outcome.exit_code)}").text = message
        counts.update(tests=1, errors=1)
    else:
        kinds: dict[str, list[CheckResult]] = {}
        for result in outcome.report.checks:
            kinds.setdefault(result.check, []).append(result)
        for kind, results in kinds.items():
            verdict = _testcase(suite, _clean(outcome.name), kind, results)
            counts["tests"] += 1
            if verdict != "passed":
                counts[verdict] += 1
    for key in COUNTS:
        suite.set(key, str(counts[key]))
    suite.set("time", f"{outcome.seconds:.3f}")
    return counts


def render_junit(outcomes: Sequence[CheckOutcome]) -> str:
    """A <testsuites> document: a testsuite per configured check, a testcase per check kind."""
    root = ET.Element("testsuites", name="gradcheck")
    totals = dict.fromkeys(COUNTS, 0)
    for outcome in outcomes:
        for key, value in _suite(root, outcome).items():
            totals[key] += value
    for key in ("tests", "failures", "errors"):  # the schema has no `skipped` on <testsuites>
        root.set(key, str(totals[key]))
    root.set("time", f"{sum(o.seconds for o in outcomes):.3f}")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
