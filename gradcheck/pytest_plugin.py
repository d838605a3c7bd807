"""The pytest plugin: `pytest --gradcheck` runs every [[tool.gradcheck.check]] as a test item
(gradcheck::NAME) through `gradcheck run`'s own code; the `gradcheck` fixture checks
gradients in hand-written tests. A failure shows gradcheck's findings, not a traceback."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from gradcheck.load.config import CheckConfig, RunConfig
    from gradcheck.report import CheckOutcome, Report

MARKER = "gradcheck"
COLLECTOR = "gradcheck"
# Set on test reports (it travels with them from pytest-xdist workers): `::error` lines.
ANNOTATIONS = "gradcheck_annotations"
_CHECK_TABLE = re.compile(r"^\s*\[\[\s*tool\s*\.\s*gradcheck\s*\.\s*check\s*\]\]")
_FIXTURE_REPORTS = pytest.StashKey[list[tuple["Report", str, int]]]()


class GradcheckWarning(UserWarning):
    """A gradient check passed with a warning (all-ones upstream, a kink, a surrogate...)."""


class GradcheckProblem(AssertionError):
    """A failed or errored gradient check: its report is the message, not the traceback."""

    def __init__(self, headline: str, text: str, path: str, line: int) -> None:
        super().__init__(headline)
        self.headline, self.text, self.path, self.line = headline, text, path, line


class ChecksFailed(GradcheckProblem):
    """At least one check failed (exit code 1)."""


class CheckErrored(GradcheckProblem):
    """The check could not run (exit code 2, 3 or 4): reported as a pytest error."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gradcheck", "gradient checks (gradcheck)")
    group.addoption("--gradcheck", action="store_true", default=False,
                    help="also run every [[tool.gradcheck.check]] of the rootdir's"
                         " pyproject.toml as a test item gradcheck::NAME")
    group.addoption("--gradcheck-config", metavar="FILE", default=None,
                    help="read the checks from FILE instead (implies --gradcheck)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}: a gradient check from [tool.gradcheck] (pytest --gradcheck)")
    if os.environ.get("GITHUB_ACTIONS") == "true" and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Annotations(), "gradcheck-github-annotations")


def _enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("gradcheck") or config.getoption("gradcheck_config"))


def _width(config: pytest.Config) -> int:
    try:
        width = config.get_terminal_writer().fullwidth
    except Exception:  # no terminal reporter (a pytest-xdist worker)
        width = 0
    return max(width, 160)


def _relative(path: Path | str) -> str:
    from gradcheck.load.locations import relative_path

    return str(relative_path(Path(path)))


def _longrepr(problem: GradcheckProblem) -> Any:
    """The findings as the whole failure text, with a one-line crash message for the short
    summary and JUnit; falls back to plain text if pytest's representation classes move."""
    text = problem.text if problem.text.endswith("\n") else problem.text + "\n"
    try:
        from _pytest._code.code import (
            ReprExceptionInfo,
            ReprFileLocation,
            ReprTracebackNative,
        )
    except ImportError:  # pragma: no cover - a future pytest
        return text
    return ReprExceptionInfo(reprtraceback=ReprTracebackNative([text]),
                             reprcrash=ReprFileLocation(problem.path, problem.line,
                                                        problem.headline))


def _headline(report: Report) -> tuple[str, str | None]:
    """The worst finding in a line, and its location."""
    worst = report.sorted_checks()[0]
    pair = " -> ".join(p for p in (worst.input, worst.output) if p)
    where = f" at {worst.location}" if worst.location else ""
    return (f"{worst.check}{f' ({pair})' if pair else ''}{where}: {worst.headline}",
            worst.location)


def _split_location(location: str | None, path: str, line: int) -> tuple[str, int]:
    if location:
        file, _, number = location.rpartition(":")
        if file and number.isdigit():
            return file, int(number)
    return path, line


def _escape(text: str, property_value: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_value else text


def _error_annotation(path: str, line: int, title: str, message: str) -> str:
    return (f"::error file={_escape(path, True)},line={line},title={_escape(title, True)}"
            f"::{_escape(message)}")


def _report_annotations(report: Report, path: str, line: int, title: str) -> str:
    """gradcheck's annotations of located failures, else one at PATH:LINE."""
    from gradcheck.render.annotations import render_github_annotations

    text = render_github_annotations(report)
    return text or _error_annotation(path, line, title, _headline(report)[0])


# --- pytest --gradcheck: the configured checks as test items --------------------------------


def _table_lines(source: Path, count: int) -> list[int]:
    """0-based line of each [[tool.gradcheck.check]] header, when they can be told apart."""
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return [0] * count
    found = [number for number, text in enumerate(lines) if _CHECK_TABLE.match(text)]
    return found if len(found) == count else [0] * count


def _has_checks(source: Path) -> bool:
    """True when SOURCE is TOML with a [tool.gradcheck] table (errors are load_config's to say)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        with source.open("rb") as handle:
            data = tomllib.load(handle)
    except (OSError, ValueError):
        return True
    tool = data.get("tool")
    return isinstance(tool, dict) and "gradcheck" in tool


def _load(config: pytest.Config) -> RunConfig:
    """--gradcheck-config FILE; else the nearest pyproject.toml from the current folder (as
    `gradcheck run` finds it), or the rootdir's when that one has no [tool.gradcheck]."""
    from gradcheck.load.config import ConfigError, find_pyproject, load_config

    here = Path(config.invocation_params.dir)
    given = config.getoption("gradcheck_config")
    if given is not None:
        return load_config(str(here / given))
    candidates = []
    with contextlib.suppress(ConfigError):
        candidates.append(find_pyproject(here))
    rootdir = Path(config.rootpath) / "pyproject.toml"
    if rootdir.is_file():
        candidates.append(rootdir)
    for candidate in candidates:
        if _has_checks(candidate):
            return load_config(str(candidate))
    return load_config(None, start=here)


def run_check(check: CheckConfig, timeout: float | None) -> CheckOutcome:
    """One configured check, exactly as `gradcheck run` runs it (each module loaded afresh)."""
    from gradcheck import runner

    return runner.run_all((check,), timeout).outcomes[0]


class GradcheckCollector(pytest.Collector):
    """The configured checks: one GradcheckItem per [[tool.gradcheck.check]] table."""

    def collect(self) -> Iterator[GradcheckItem]:
        run = _load(self.config)
        self.path = run.source.resolve()
        for check, line in zip(run.checks, _table_lines(run.source, len(run.checks))):
            yield GradcheckItem.from_parent(self, name=check.name, path=self.path,
                                            check=check, timeout=run.timeout, line=line)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> Any:
        from gradcheck.errors import GradcheckError

        if isinstance(excinfo.value, GradcheckError):
            return f"Error: {excinfo.value.message}"
        return super().repr_failure(excinfo)


class GradcheckItem(pytest.Item):
    """One configured check: run in setup (so that a check that cannot run is a pytest
    error), judged in the call (a failing check is a test failure)."""

    def __init__(self, *, check: CheckConfig, timeout: float | None, line: int,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check
        self.timeout = timeout
        self.line = line
        self.outcome: CheckOutcome | None = None
        # No user_properties: pytest writes them as testcase-level <properties>, which the
        # junit-10 schema that CI reporters read does not allow.
        self.add_marker(MARKER)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.line, f"{COLLECTOR}::{self.name}"

    def setup(self) -> None:
        self.outcome = run_check(self.check, self.timeout)
        if self.outcome.report is None:
            self._raise_error(self.outcome)

    def _raise_error(self, outcome: CheckOutcome) -> None:
        message = f"Error: {outcome.error or 'error'} (exit code {int(outcome.exit_code)})"
        text = message
        if outcome.user_traceback and self.config.getoption("tbstyle", "auto") in (
                "auto", "long", "native"):
            text = outcome.user_traceback.rstrip() + "\n" + message
        raise CheckErrored(message, text, _relative(self.path), self.line + 1)

    def runtest(self) -> None:
        from gradcheck.render.text import render_text

        assert self.outcome is not None and self.outcome.report is not None
        report = self.outcome.report
        if not report.ok:
            line, location = _headline(report)
            path, number = _split_location(location, _relative(self.path), self.line + 1)
            raise ChecksFailed(line, render_text(report, width=_width(self.config)), path,
                               number)
        for result in report.sorted_checks():
            if result.status != "warn":
                continue
            path, number = _split_location(result.location, str(self.path), self.line + 1)
            warnings.warn_explicit(
                GradcheckWarning(f"{self.name}: {result.check}: {result.headline}"),
                GradcheckWarning, path, number)

    def annotations(self) -> str:
        """`::error` lines for this item's failure or error."""
        path, line = _relative(self.path), self.line + 1
        title = f"{COLLECTOR}::{self.name}"
        if self.outcome is None:
            return ""
        if self.outcome.report is None:
            return _error_annotation(path, line, title, self.outcome.error or "error")
        return _report_annotations(self.outcome.report, path, line, title)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> Any:
        if isinstance(excinfo.value, GradcheckProblem):
            return _longrepr(excinfo.value)
        return super().repr_failure(excinfo)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """Add the configured checks before -k, -m and --deselect look at the items."""
    if not _enabled(config):
        return
    collector = GradcheckCollector.from_parent(session, name=COLLECTOR, nodeid=COLLECTOR)
    report = collector.ihook.pytest_make_collect_report(collector=collector)
    session.ihook.pytest_collectreport(report=report)
    if report.passed:
        items.extend(node for node in report.result if isinstance(node, pytest.Item))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report = outcome.get_result()
    excinfo = call.excinfo
    if excinfo is not None and isinstance(excinfo.value, GradcheckProblem):
        report.longrepr = _longrepr(excinfo.value)
    if not report.failed or os.environ.get("GITHUB_ACTIONS") != "true":
        return
    if isinstance(item, GradcheckItem):
        text = item.annotations()
    else:
        text = "\n".join(_report_annotations(r, path, line, item.nodeid)
                         for r, path, line in item.stash.get(_FIXTURE_REPORTS, [])
                         if not r.ok)
    if text:
        setattr(report, ANNOTATIONS, text)


class _Annotations:
    """Under GITHUB_ACTIONS=true, print every failure's `::error` lines at the end (in the
    main process: reports from pytest-xdist workers carry them)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        text = getattr(report, ANNOTATIONS, None)
        if text:
            self.lines.extend(text.splitlines())

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for line in dict.fromkeys(self.lines):
            terminalreporter.write_line(line)


# --- the gradcheck fixture: hand-written tests -----------------------------------------------


class GradcheckFixture:
    """`gradcheck(f, *args, **options)`: gradcheck.check(f, *args, **options), failing the
    test with gradcheck's table when a check fails, and returning the report otherwise.

    Options are gradcheck.check's (atol, rtol, upstream, mode, seed, ...); `rel` and `abs`
    are accepted for rtol and atol, as pytest.approx spells them.
    """

    def __init__(self, node: pytest.Item | None,
                 check: Callable[..., Report] | None = None) -> None:
        self.node = node
        self._check = check
        self.reports: list[Report] = []

    def check(self, f: Any, *args: Any, rel: float | None = None, abs: float | None = None,
              **options: Any) -> Report:
        """The report, without failing the test."""
        for alias, name, value in (("rel", "rtol", rel), ("abs", "atol", abs)):
            if value is None:
                continue
            if options.get(name) is not None:
                raise TypeError(f"give {alias}= or {name}=, not both")
            options[name] = value
        if self._check is not None:
            return self._check(f, *args, **options)
        from gradcheck import api

        return api.check(f, *args, **options)

    def __call__(self, f: Any, *args: Any, rel: float | None = None, abs: float | None = None,
                 **options: Any) -> Report:
        from gradcheck.render.text import render_text

        __tracebackhide__ = True  # a failure points at the test's line, not at this frame
        caller = sys._getframe(1)
        path, line = _relative(caller.f_code.co_filename), caller.f_lineno
        report = self.check(f, *args, rel=rel, abs=abs, **options)
        self.reports.append(report)
        if self.node is not None:
            self.node.stash.setdefault(_FIXTURE_REPORTS, []).append((report, path, line))
        if not report.ok:
            summary = _headline(report)[0]
            width = _width(self.node.config) if self.node is not None else 160
            text = (f"{path}:{line}: gradients of {report.target} are wrong\n"
                    + render_text(report, width=width))
            raise ChecksFailed(summary, text, path, line)
        return report


@pytest.fixture
def gradcheck(request: pytest.FixtureRequest) -> GradcheckFixture:
    """Check a function's gradients: `gradcheck(f, x, atol=..., rtol=...)` returns the report
    and fails the test with gradcheck's findings when a gradient is wrong."""
    node = request.node if isinstance(request.node, pytest.Item) else None
    return GradcheckFixture(node)
