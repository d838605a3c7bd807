"""JUnit XML: parsed and validated against the rules of the common junit-10 schema."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

from click.testing import Result

from gradcheck.errors import ExitCode
from gradcheck.evidence import Location
from gradcheck.render.junit import render_junit
from gradcheck.report import CheckOutcome, CheckResult, Report, TensorInfo
from tests.junit_schema import junit_10_errors

# The junit-10.xsd rules (Jenkins xUnit / Surefire): children and attributes per element.
SCHEMA: dict[str, tuple[set[str], set[str], set[str]]] = {
    # element: (allowed children, allowed attributes, required attributes)
    "testsuites": ({"testsuite"}, {"name", "time", "tests", "failures", "errors"}, set()),
    "testsuite": ({"testsuite", "properties", "testcase", "system-out", "system-err"},
                  {"name", "tests", "failures", "errors", "group", "time", "skipped",
                   "timestamp", "hostname", "id", "package", "file", "log", "url"},
                  {"name", "tests", "failures", "errors"}),
    "properties": ({"property"}, set(), set()),
    "property": (set(), {"name", "value"}, {"name", "value"}),
    "testcase": ({"skipped", "error", "failure", "system-out", "system-err"},
                 {"name", "time", "classname", "group"}, {"name"}),
    "failure": (set(), {"type", "message"}, set()),
    "error": (set(), {"type", "message"}, set()),
    "skipped": (set(), {"type", "message"}, set()),
    "system-out": (set(), set(), set()),
    "system-err": (set(), set(), set()),
}
SUREFIRE_TIME = re.compile(r"(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]*)?")


def schema_problems(element: ET.Element, path: str = "") -> list[str]:
    here = f"{path}/{element.tag}"
    if element.tag not in SCHEMA:
        return [f"{here}: unknown element"]
    children, allowed, required = SCHEMA[element.tag]
    problems = [f"{here}: attribute {a!r} not allowed" for a in element.attrib if a not in allowed]
    problems += [f"{here}: attribute {a!r} missing" for a in required - set(element.attrib)]
    if "time" in element.attrib and element.tag in ("testsuites", "testsuite") and not (
            SUREFIRE_TIME.fullmatch(element.attrib["time"])):
        problems.append(f"{here}: time {element.attrib['time']!r} is not a SUREFIRE_TIME")
    for child in element:
        if child.tag not in children:
            problems.append(f"{here}: child <{child.tag}> not allowed")
        problems += schema_problems(child, here)
    return problems


def count_problems(root: ET.Element) -> list[str]:
    """Each suite's counts match its testcases, and the totals match the suites."""
    problems = []
    for suite in root.iter("testsuite"):
        cases = suite.findall("testcase")
        actual = {"tests": len(cases),
                  "failures": sum(1 for c in cases if c.find("failure") is not None),
                  "errors": sum(1 for c in cases if c.find("error") is not None),
                  "skipped": sum(1 for c in cases if c.find("skipped") is not None)}
        problems += [f"suite {suite.get('name')}: {k}={suite.get(k)} but {v} found"
                     for k, v in actual.items() if int(suite.get(k, "0")) != v]
    for key in ("tests", "failures", "errors"):
        total = sum(int(s.get(key, "0")) for s in root.findall("testsuite"))
        if int(root.get(key, "-1")) != total:
            problems.append(f"testsuites {key}={root.get(key)} but suites add up to {total}")
    return problems


def valid(text: str) -> ET.Element:
    assert text.startswith("<?xml version='1.0' encoding='utf-8'?>")
    root = ET.fromstring(text)
    assert root.tag == "testsuites"
    assert schema_problems(root) == []
    assert count_problems(root) == []
    assert junit_10_errors(text) == []  # the schema itself (tests/data/junit-10.xsd)
    return root


def report(*results: CheckResult, target: str = "ops.py:f") -> Report:
    x = TensorInfo("x", (2,), "float64")
    return Report(target, (x,), (TensorInfo("y", (2,), "float64"),), results)


FAIL = CheckResult("grad-shape", "fail", "grad_fn returned shape (2, 2) for x of shape (2,)",
                   input="x", output="y", location=Location("ops.py", 9))
PASSED = CheckResult("jacobian", "pass", "autodiff matches finite differences", "x", "y")
WARNED = CheckResult("upstream", "warn", "the upstream for y is all ones", output="y")
SKIPPED = CheckResult("vjp", "skip", "no VJP for x: its gradient is broken", input="x")
ERRORED = CheckResult("jacobian", "error", "tape.jacobian failed: boom", "x", "y")


def test_the_validator_rejects_what_the_schema_rejects() -> None:
    bad = ET.fromstring('<testsuites skipped="1"><testsuite name="a" time="1s">'
                        '<testcase file="x"/><bogus/></testsuite></testsuites>')
    assert sorted(schema_problems(bad)) == [
        "/testsuites/testsuite/bogus: unknown element",
        "/testsuites/testsuite/testcase: attribute 'file' not allowed",
        "/testsuites/testsuite/testcase: attribute 'name' missing",
        "/testsuites/testsuite: attribute 'errors' missing",
        "/testsuites/testsuite: attribute 'failures' missing",
        "/testsuites/testsuite: attribute 'tests' missing",
        "/testsuites/testsuite: child <bogus> not allowed",
        "/testsuites/testsuite: time '1s' is not a SUREFIRE_TIME",
        "/testsuites: attribute 'skipped' not allowed",
    ]
    assert count_problems(ET.fromstring(
        '<testsuites tests="2"><testsuite name="a" tests="1" failures="1" errors="0">'
        '<testcase name="t"/></testsuite></testsuites>')) == [
        "suite a: failures=1 but 0 found",
        "testsuites tests=2 but suites add up to 1",
        "testsuites failures=None but suites add up to 1",
        "testsuites errors=None but suites add up to 0",
    ]


def test_the_junit_10_schema_rejects_testcase_properties_and_bad_times() -> None:
    base = ('<testsuites><testsuite name="a" tests="1" failures="0" errors="0"{time}>'
            '<testcase name="t">{inner}</testcase></testsuite></testsuites>')
    assert junit_10_errors(base.format(time=' time="1.500"', inner="")) == []
    properties = '<properties><property name="k" value="v"/></properties>'
    assert junit_10_errors(base.format(time="", inner=properties)) != []
    assert junit_10_errors(base.format(time=' time="1.5s"', inner="")) != []


def test_one_testcase_per_check_kind_with_message_and_location() -> None:
    outcome = CheckOutcome("softplus", "ops.py:f", report(FAIL, PASSED, WARNED, SKIPPED),
                           ExitCode.CHECK_FAILED, 1.25)
    root = valid(render_junit([outcome]))
    (suite,) = root.findall("testsuite")
    assert suite.attrib == {"name": "softplus", "tests": "4", "failures": "1", "errors": "0",
                            "skipped": "1", "time": "1.250"}
    assert {p.get("name"): p.get("value") for p in suite.iter("property")} == {
        "target": "ops.py:f", "exit_code": "1"}
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert list(cases) == ["grad-shape", "jacobian", "upstream", "vjp"]
    assert all(case.get("classname") == "softplus" for case in cases.values())
    failure = cases["grad-shape"].find("failure")
    assert failure is not None and failure.get("type") == "grad-shape"
    assert failure.get("message") == "ops.py:9: grad_fn returned shape (2, 2) for x of shape (2,)"
    assert failure.text == ("[fail] x -> y at ops.py:9: grad_fn returned shape (2, 2) for x of"
                            " shape (2,)")
    assert cases["jacobian"].find("failure") is None
    assert cases["upstream"].findtext("system-out") == ("[warn] - -> y: the upstream for y is"
                                                        " all ones")
    skipped = cases["vjp"].find("skipped")
    assert skipped is not None and skipped.get("message") == SKIPPED.message


def test_errored_checks_and_loading_errors_are_errors() -> None:
    outcomes = [
        CheckOutcome("a", "ops.py:f", report(ERRORED, PASSED), ExitCode.CHECK_FAILED, 0.5),
        CheckOutcome("b", "ops:nope", None, ExitCode.USAGE_ERROR, 0.0,
                     error="attribute 'nope' not found in module 'ops'"),
        CheckOutcome("c", "ops:raises", None, ExitCode.FUNCTION_ERROR, 0.1,
                     error="raises raised ValueError: bad (at ops.py:3)"),
    ]
    root = valid(render_junit(outcomes))
    assert root.attrib == {"name": "gradcheck", "tests": "3", "failures": "0", "errors": "3",
                           "time": "0.600"}
    a, b, c = root.findall("testsuite")
    jacobian = a.find("testcase[@name='jacobian']")
    assert jacobian is not None and jacobian.find("error") is not None
    b_case, c_case = b.find("testcase"), c.find("testcase")
    assert b_case is not None and c_case is not None
    assert (b_case.get("name"), c_case.get("name")) == ("setup", "evaluate")
    error = c_case.find("error")
    assert error is not None and error.get("type") == "exit code 3"
    assert error.get("message") == "raises raised ValueError: bad (at ops.py:3)"


def test_a_crash_is_an_error_that_names_its_phase() -> None:
    from gradcheck.report import CheckOutcome

    message = ("TensorFlow aborted (SIGABRT) during the vectorised tape.jacobian of y with"
               " respect to x; checked again without vectorisation: TensorFlow aborted (SIGABRT)"
               " during the while-loop tape.jacobian of y with respect to x")
    outcome = CheckOutcome("expm", "ops:expm", None, ExitCode.INTERNAL_ERROR, 2.5, message,
                         phase="the while-loop tape.jacobian of y with respect to x")
    (suite,) = valid(render_junit([outcome])).findall("testsuite")
    assert {p.get("name"): p.get("value") for p in suite.iter("property")} == {
        "target": "ops:expm", "exit_code": "4",
        "phase": "the while-loop tape.jacobian of y with respect to x"}
    error = suite.find("testcase[@name='evaluate']/error")
    assert error is not None and error.get("type") == "exit code 4"
    assert error.get("message") == message


def test_characters_xml_cannot_carry_are_replaced() -> None:
    message = "raised ValueError: \x1b[31mred\x1b[0m \x00 done"
    outcome = CheckOutcome("n\x07ame", "ops:f", None, ExitCode.FUNCTION_ERROR, error=message)
    root = valid(render_junit([outcome]))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "n\ufffdame"
    error = root.find(".//error")
    assert error is not None
    assert error.get("message") == "raised ValueError: \ufffd[31mred\ufffd[0m \ufffd done"


def test_no_checks_gives_an_empty_but_valid_document() -> None:
    root = valid(render_junit([]))
    assert root.attrib == {"name": "gradcheck", "tests": "0", "failures": "0", "errors": "0",
                           "time": "0.000"}


def test_run_on_the_sample_project_writes_valid_junit(
        tmp_path: Path, in_fixtures: Path, run_cli: Callable[..., Result]) -> None:
    target = tmp_path / "junit.xml"
    result = run_cli(["run", "--config", "ci_project/pyproject.toml", "--format", "junit",
                      "-o", str(target)], env={"GITHUB_ACTIONS": "true"})
    assert result.exit_code == 2  # missing-function is a loading error
    root = valid(target.read_text())  # -o: the XML goes to the file only
    assert result.stdout == ""
    # Under GitHub Actions the failures are annotated too, on stderr.
    assert "::error file=ci_project/ops.py,line=18,title=gradcheck custom-gradient::" \
        in result.stderr
    assert "::error title=gradcheck missing-function::attribute 'no_such_function'" \
        in result.stderr
    suites = {suite.get("name"): suite for suite in root.findall("testsuite")}
    assert list(suites) == ["softplus", "moments", "clipped-identity", "missing-function"]
    assert suites["softplus"].get("failures") == "0" and suites["softplus"].get("errors") == "0"
    clipped = suites["clipped-identity"]
    failing = {case.get("name") for case in clipped.findall("testcase")
               if case.find("failure") is not None}
    assert "vjp" in failing
    assert suites["missing-function"].find("testcase/error") is not None


def test_single_target_junit_is_valid(in_fixtures: Path, run_cli: Callable[..., Result]) -> None:
    result = run_cli(["check", "variable_from_input.py:f", "--format", "junit"])
    assert result.exit_code == 1
    root = valid(result.stdout)
    connected = root.find("testsuite/testcase[@name='connected']/failure")
    assert connected is not None
    assert (connected.get("message") or "").startswith("variable_from_input.py:")


def test_run_annotates_failures_in_the_table_format_and_gives_both_times(
        in_fixtures: Path, run_cli: Callable[..., Result]) -> None:
    result = run_cli(["run", "--config", "ci_project/pyproject.toml", "-k", "clipped"],
                     env={"GITHUB_ACTIONS": "true"})
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("::error ")] == [
        line for line in lines if line.startswith(
            "::error file=ci_project/ops.py,line=18,title=gradcheck custom-gradient::")]
    verdict = next(line for line in lines if line.startswith("FAILED 1 check"))
    wall, checks = re.search(r"in ([0-9.]+)s, ([0-9.]+)s of it in the checks", verdict).groups()
    assert float(wall) >= float(checks) >= 0  # a check reusing cached traces can take < 0.05 s
