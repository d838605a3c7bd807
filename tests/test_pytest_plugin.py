"""The pytest plugin, run as users run it: `pytest --gradcheck` on the bundled CI project
(serially and with pytest-xdist), and the `gradcheck` fixture in hand-written tests."""

from __future__ import annotations

import json
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from gradcheck.pytest_plugin import GradcheckFixture
from gradcheck.report import Report
from tests.conftest import FIXTURES
from tests.junit_schema import junit_10_errors

pytest_plugins = ["pytester"]

CHECKS = ["softplus", "moments", "clipped-identity", "missing-function"]
# Writes each configured check's outcome (the single-target JSON of `gradcheck run`).
DUMP_CONFTEST = """
import json, os
from gradcheck.runner import outcome_dict

def pytest_runtest_teardown(item):
    outcome = getattr(item, "outcome", None)
    if outcome is not None:
        path = os.path.join(os.environ["GRADCHECK_DUMP"], item.name + ".json")
        with open(path, "w") as handle:
            json.dump(outcome_dict(outcome), handle)
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    """A copy of fixtures/ci_project: two passing checks, one failing, one that cannot load."""
    for name in ("ops.py", "pyproject.toml"):
        shutil.copy(FIXTURES / "ci_project" / name, pytester.path / name)
    return pytester.path


def verdicts(folder: Path) -> dict[str, Any]:
    found = {}
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        data.pop("seconds")
        found[data["name"]] = data
    return found


def test_checks_are_collected_as_items_and_selected_as_usual(
        pytester: pytest.Pytester, project: Path) -> None:
    result = pytester.runpytest_subprocess("--gradcheck", "--collect-only", "-q")
    assert result.outlines[:4] == [f"gradcheck::{name}" for name in CHECKS]
    result.stdout.fnmatch_lines(["4 tests collected*"])
    selected = pytester.runpytest_subprocess("--gradcheck", "--collect-only", "-q",
                                             "-k", "identity or moments")
    assert selected.outlines[:2] == ["gradcheck::moments", "gradcheck::clipped-identity"]
    marked = pytester.runpytest_subprocess("--gradcheck", "--collect-only", "-q",
                                           "-m", "not gradcheck")
    marked.stdout.fnmatch_lines(["no tests collected (4 deselected)*"])
    off = pytester.runpytest_subprocess("--collect-only", "-q")
    assert not any("gradcheck::" in line for line in off.outlines)


def test_verdicts_equal_gradcheck_run_serially_and_with_xdist(
        pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeconftest(DUMP_CONFTEST)
    run = pytester.run(sys.executable, "-m", "gradcheck", "run", "--format", "json")
    assert run.ret == 2
    expected = {}
    for data in json.loads(run.stdout.str())["reports"]:
        data.pop("seconds")
        expected[data["name"]] = data
    assert {name: data["exit_code"] for name, data in expected.items()} == {
        "softplus": 0, "moments": 0, "clipped-identity": 1, "missing-function": 2}

    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    for label, extra in (("serial", []), ("xdist", ["-n", "2"])):
        dump = project / f"dump-{label}"
        dump.mkdir()
        monkeypatch.setenv("GRADCHECK_DUMP", str(dump))
        junit = project / f"{label}.xml"
        result = pytester.runpytest_subprocess("--gradcheck", f"--junitxml={junit}", *extra)
        result.assert_outcomes(passed=2, failed=1, errors=1)
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        assert verdicts(dump) == expected, label

        text = result.stdout.str()
        # The failure is gradcheck's findings, not a traceback through the plugin.
        assert "1. FAIL custom-gradient (x -> y)  ops.py:18" in text
        assert "grad_fn is off by a constant factor of 2" in text
        assert "Traceback" not in text and "pytest_plugin.py" not in text
        result.stdout.fnmatch_lines([
            "FAILED gradcheck::clipped-identity - custom-gradient (x -> y) at ops.py:18: *",
            "ERROR gradcheck::missing-function - Error: attribute 'no_such_function' not*"])
        # GitHub annotations, from the workers' reports too.
        assert ("::error file=ops.py,line=18,title=gradcheck custom-gradient::custom_gradient"
                " clipped_identity (line 16): grad_fn is off by a constant factor of 2") in text
        assert ("::error file=pyproject.toml,line=29,title=gradcheck%3A%3Amissing-function"
                "::attribute 'no_such_function' not found in module 'ops'") in text

        assert junit_10_errors(junit) == [], label  # no testcase-level <properties>
        cases = {case.get("name"): case for case in ET.parse(junit).iter("testcase")}
        assert sorted(cases) == sorted(CHECKS)
        assert {case.get("classname") for case in cases.values()} == {"gradcheck"}
        failure = cases["clipped-identity"].find("failure")
        assert failure is not None and failure.get("message", "").startswith(
            "custom-gradient (x -> y) at ops.py:18: custom_gradient clipped_identity")
        error = cases["missing-function"].find("error")
        assert error is not None and "attribute 'no_such_function' not found" in error.get(
            "message", "")
        assert cases["softplus"].find("failure") is None


def test_x_stops_at_the_first_failure(pytester: pytest.Pytester, project: Path) -> None:
    result = pytester.runpytest_subprocess("--gradcheck", "-x", "-q", "-k", "clipped or missing")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*stopping after 1 failures*"])


def test_warnings_pass_and_show_in_the_warnings_summary(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml(f"""
        [tool.gradcheck]
        [[tool.gradcheck.check]]
        name = "ste"
        target = "{FIXTURES / 'straight_through.py'}:quantised_layer"
        surrogate = "ste_round"
    """)
    result = pytester.runpytest_subprocess("--gradcheck", "-p", "no:xdist")
    result.assert_outcomes(passed=1, warnings=3)
    result.stdout.fnmatch_lines(["*GradcheckWarning: ste: custom-gradient: *"])


def test_a_configuration_error_is_one_collection_error(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml("""
        [tool.gradcheck]
        [[tool.gradcheck.check]]
        target = "ops:f"
        atoll = 1
    """)
    result = pytester.runpytest_subprocess("--gradcheck")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting gradcheck*"])
    assert ("\nError: tool.gradcheck.check[0].atoll: unknown key; known keys are accumulate,"
            " against, atol," in result.stdout.str())
    assert "Traceback" not in result.stdout.str()


def test_gradcheck_config_names_another_file(pytester: pytest.Pytester) -> None:
    (pytester.path / "sub").mkdir()
    for name in ("ops.py", "pyproject.toml"):
        shutil.copy(FIXTURES / "ci_project" / name, pytester.path / "sub" / name)
    result = pytester.runpytest_subprocess("--gradcheck-config", "sub/pyproject.toml",
                                           "--collect-only", "-q")
    assert result.outlines[:4] == [f"gradcheck::{name}" for name in CHECKS]


def test_checks_are_collected_whatever_paths_pytest_is_given(
        pytester: pytest.Pytester, project: Path) -> None:
    pytester.makepyfile(test_own="def test_own():\n    pass\n")
    config = project / "pyproject.toml"
    config.write_text(config.read_text() + '\n[tool.pytest.ini_options]\ntestpaths = ["x"]\n')
    (project / "x").mkdir()
    for args in ((), ("test_own.py",)):
        result = pytester.runpytest_subprocess("--gradcheck", "--collect-only", "-q", *args)
        own = ["test_own.py::test_own"] if args else []
        assert result.outlines[:len(own) + 4] == own + [f"gradcheck::{n}" for n in CHECKS]


def test_a_missing_configuration_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--gradcheck-config", "missing.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: config file '*missing.toml' not found"])


def test_a_usage_error_names_the_plugins_own_option(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--gradcheck", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: no pyproject.toml in * give --gradcheck-config FILE"])


def test_the_gradcheck_fixture_in_hand_written_tests(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    pytester.makepyfile(test_hand=f"""
        FIXTURES = {str(FIXTURES)!r}

        def test_correct(gradcheck):
            report = gradcheck(FIXTURES + "/custom_gradient_correct.py:f")
            assert report.ok

        def test_transposed(gradcheck):
            gradcheck(FIXTURES + "/custom_gradient_mistakes.py:transposed")

        def test_slightly_wrong_at_default_tolerance(gradcheck):
            gradcheck(FIXTURES + "/slightly_wrong_gradient.py:f")

        def test_slightly_wrong_within_a_loose_tolerance(gradcheck):
            assert gradcheck(FIXTURES + "/slightly_wrong_gradient.py:f", rel=1e-3).ok
    """)
    result = pytester.runpytest_subprocess("-p", "no:xdist")
    result.assert_outcomes(passed=2, failed=2)
    text = result.stdout.str()
    assert "test_hand.py:8: gradients of " in text and "transposed are wrong" in text
    assert "grad_fn uses J where Jᵀ is needed" in text
    assert "Traceback" not in text and "def test_transposed" not in text
    result.stdout.fnmatch_lines([
        "FAILED test_hand.py::test_transposed - custom-gradient (x -> y) at *",
        "FAILED test_hand.py::test_slightly_wrong_at_default_tolerance - *"])
    assert "::error file=" in text and "custom_gradient_mistakes.py,line=13" in text


def test_assert_gradients_failures_show_the_callers_line_not_gradchecks_frames(
        pytester: pytest.Pytester) -> None:
    target = f"{FIXTURES}/custom_gradient_mistakes.py:transposed"
    pytester.makepyfile(test_api=f"""
        import gradcheck

        def test_transposed():
            gradcheck.assert_gradients({target!r})
    """)
    junit = pytester.path / "api.xml"
    result = pytester.runpytest_subprocess("-p", "no:xdist", f"--junitxml={junit}")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "gradients of " in text and "grad_fn uses J where Jᵀ is needed" in text
    assert "test_api.py:4: AssertionError" in text
    assert "gradcheck/api.py" not in text and "def assert_gradients" not in text
    assert junit_10_errors(junit) == []


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, f: Any, *args: Any, **options: Any) -> Report:
        self.calls.append((f, args, options))
        return Report("f", (), (), ())


def test_fixture_forwards_tolerances_like_pytest_approx() -> None:
    recorder = Recorder()
    fixture = GradcheckFixture(None, check=recorder)
    assert fixture(len, 1.0, rel=1e-3, abs=1e-9, mode="full").ok
    fixture(len, atol=1e-7, rtol=1e-2)
    assert recorder.calls == [(len, (1.0,), {"rtol": 1e-3, "atol": 1e-9, "mode": "full"}),
                              (len, (), {"atol": 1e-7, "rtol": 1e-2})]
    with pytest.raises(TypeError, match="give rel= or rtol=, not both"):
        fixture(len, rel=1e-3, rtol=1e-3)
