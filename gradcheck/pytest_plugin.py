"""The pytest plugin: with `--gradcheck` the configuration file (the one `gradcheck run` reads) is
collected as a test file whose items, gradcheck::NAME, are its [[tool.gradcheck.check]] tables,
each run through `gradcheck run`'s own code; the `gradcheck` fixture checks gradients in
hand-written tests. A failure shows gradcheck's findings, headline first, not a traceback."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import warnings
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from gradcheck.evidence import Location
    from gradcheck.load.config import CheckConfig, ConfigError, RunConfig
    from gradcheck.report import CheckOutcome, Report

MARKER = "gradcheck"
COLLECTOR = "gradcheck"
# Set on test reports (it travels with them from pytest-xdist workers): `::error` lines.
ANNOTATIONS = "gradcheck_annotations"
_CHECK_TABLE = re.compile(r"^\s*\[\[\s*tool\s*\.\s*gradcheck\s*\.\s*check\s*\]\]")
_FIXTURE_REPORTS = pytest.StashKey[list[tuple["Report", str, int]]]()
# With --gradcheck: the configuration file, and its checks or why they cannot be read.
_SOURCE = pytest.StashKey[tuple[Path, "RunConfig | ConfigError"]]()


class GradcheckWarning(UserWarning):
    """A gradient check passed with a warning (all-ones upstream, a kink, a surrogate...)."""


class GradcheckProblem(AssertionError):
    """A failed or errored gradient check: its headline, then its report, is the whole failure
    text (the headline is what pytest's short summary and JUnit's message show)."""

    def __init__(self, headline: str, details: str) -> None:
        super().__init__(headline)
        self.headline = headline
        self.text = f"{headline}\n{details}".rstrip("\n")


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
    from gradcheck.render.display import share_terminal_width

    share_terminal_width()  # with its pytest-xdist workers, which have no terminal
    config.addinivalue_line(
        "markers", f"{MARKER}: a gradient check from [tool.gradcheck] (pytest --gradcheck)")
    if config.getoption("gradcheck") or config.getoption("gradcheck_config"):
        config.stash[_SOURCE] = _source(config)
        # Collected whatever paths or testpaths are given (pytest drops it if one holds it).
        config.args.append(str(config.stash[_SOURCE][0]))
    if os.environ.get("GITHUB_ACTIONS") == "true" and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Annotations(), "gradcheck-github-annotations")


def _source(config: pytest.Config) -> tuple[Path, RunConfig | ConfigError]:
    """--gradcheck-config FILE; else the nearest pyproject.toml from the current folder (as
    `gradcheck run` finds it), or the rootdir's when only that one reads; read by load_config.
    No file to collect is a usage error, as a missing path is to pytest."""
    from gradcheck.load.config import ConfigError, find_pyproject, load_config

    here = Path(config.invocation_params.dir)
    given = config.getoption("gradcheck_config")
    if given is not None:
        candidates = [here / given]
    else:
        candidates = [Path(config.rootpath) / "pyproject.toml"]
        with contextlib.suppress(ConfigError):
            candidates.insert(0, find_pyproject(here))
    failed: list[tuple[Path, RunConfig | ConfigError]] = []
    for path in dict.fromkeys(path for path in candidates if path.is_file()):
        try:
            return path, load_config(str(path))
        except ConfigError as exc:
            failed.append((path, exc))
    if failed:
        return failed[0]
    try:
        run = load_config(None if given is None else str(here / given), start=here)
    except ConfigError as exc:
        raise pytest.UsageError(_own_words(exc.message)) from exc
    return run.source, run


def _own_words(message: str) -> str:
    """A configuration error as the plugin's options say it (`gradcheck run`'s --config is
    --gradcheck-config here)."""
    return message.replace("--config FILE", "--gradcheck-config FILE")


def _width(config: pytest.Config) -> int:
    """The terminal's width, as str(report) takes it (160 columns off a terminal: a
    pytest-xdist worker, a CI log)."""
    from gradcheck.render.display import text_width

    return text_width()


def _relative(path: Path | str) -> str:
    from gradcheck.load.locations import relative_path

    return str(relative_path(Path(path)))


def _headline(report: Report) -> str:
    from gradcheck.render.table import check_headline

    return check_headline(report.sorted_checks()[0])


def _warning_place(location: Location | None, path: str, line: int) -> tuple[str, int]:
    """Where a warning points: the finding's line, else PATH:LINE."""
    if location is not None and location.line is not None:
        return location.path, location.line
    return path, line


def _report_annotations(report: Report, path: str, line: int, title: str) -> str:
    """gradcheck's annotations of located failures, else one at PATH:LINE."""
    from gradcheck.render.annotations import error_annotation, render_github_annotations

    text = render_github_annotations(report)
    return text or error_annotation(title, _headline(report), path, line)


# --- pytest --gradcheck: the configured checks as test items --------------------------------


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> GradcheckFile | None:
    source = parent.config.stash.get(_SOURCE, None)
    if source is None or file_path.name != source[0].name or not file_path.samefile(source[0]):
        return None
    return GradcheckFile.from_parent(parent, path=file_path, name=COLLECTOR, nodeid=COLLECTOR)


def _table_lines(source: Path, count: int) -> list[int]:
    """0-based line of each [[tool.gradcheck.check]] header, when they can be told apart."""
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return [0] * count
    found = [number for number, text in enumerate(lines) if _CHECK_TABLE.match(text)]
    return found if len(found) == count else [0] * count


def check_configured(check: CheckConfig, timeout: float | None) -> CheckOutcome:
    """One configured check, exactly as `gradcheck run` runs it (each module loaded afresh)."""
    from gradcheck import runner

    return runner.run_all((check,), timeout).outcomes[0]


class GradcheckFile(pytest.File):
    """The configuration file: one GradcheckItem per [[tool.gradcheck.check]] table; a
    configuration error is this file's collection error."""

    def collect(self) -> Iterator[GradcheckItem]:
        run = self.config.stash[_SOURCE][1]
        if isinstance(run, Exception):
            raise run
        for check, line in zip(run.checks, _table_lines(self.path, len(run.checks))):
            yield GradcheckItem.from_parent(self, name=check.name, check=check,
                                            timeout=run.timeout, line=line)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> Any:
        from gradcheck.errors import GradcheckError

        if isinstance(excinfo.value, GradcheckError):
            return f"Error: {_own_words(excinfo.value.message)}"
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
        self.outcome = check_configured(self.check, self.timeout)
        if self.outcome.report is None:
            message = (f"Error: {self.outcome.error or 'error'}"
                       f" (exit code {int(self.outcome.exit_code)})")
            shown = self.config.getoption("tbstyle", "auto") in ("auto", "long", "native")
            raise CheckErrored(message, (shown and self.outcome.user_traceback) or "")

    def runtest(self) -> None:
        from gradcheck.render.text import render_text

        assert self.outcome is not None and self.outcome.report is not None
        report = self.outcome.report
        if not report.ok:
            raise ChecksFailed(_headline(report), render_text(report, width=_width(self.config)))
        for result in report.sorted_checks():
            if result.status != "warn":
                continue
            path, number = _warning_place(result.location, str(self.path), self.line + 1)
            warnings.warn_explicit(
                GradcheckWarning(f"{self.name}: {result.check}: {result.headline}"),
                GradcheckWarning, path, number)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> Any:
        if isinstance(excinfo.value, GradcheckProblem):
            return excinfo.value.text
        return super().repr_failure(excinfo, style)

    def annotations(self) -> str:
        """`::error` lines for this item's failure or error."""
        from gradcheck.render.annotations import error_annotation

        path, line = _relative(self.path), self.line + 1
        title = f"{COLLECTOR}::{self.name}"
        if self.outcome is None:
            return ""
        if self.outcome.report is None:
            return error_annotation(title, self.outcome.error or "error", path, line)
        return _report_annotations(self.outcome.report, path, line, title)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    problem = call.excinfo.value if call.excinfo is not None else None
    if isinstance(problem, GradcheckProblem) and (
            call.when != "call" or not isinstance(item, GradcheckItem)):
        # Where pytest does not ask repr_failure: a setup error, a plain test's fixture call.
        report.longrepr = problem.text
    if not report.failed or os.environ.get("GITHUB_ACTIONS") != "true":
        return report
    if isinstance(item, GradcheckItem):
        text = item.annotations()
    else:
        text = "\n".join(_report_annotations(r, path, line, item.nodeid)
                         for r, path, line in item.stash.get(_FIXTURE_REPORTS, [])
                         if not r.ok)
    if text:
        setattr(report, ANNOTATIONS, text)
    return report


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
            width = _width(self.node.config) if self.node is not None else 160
            raise ChecksFailed(_headline(report),
                               f"{path}:{line}: gradients of {report.target} are wrong\n"
                               + render_text(report, width=width))
        return report


@pytest.fixture
def gradcheck(request: pytest.FixtureRequest) -> GradcheckFixture:
    """Check a function's gradients: `gradcheck(f, x, atol=..., rtol=...)` returns the report
    and fails the test with gradcheck's findings when a gradient is wrong."""
    node = request.node if isinstance(request.node, pytest.Item) else None
    return GradcheckFixture(node)
