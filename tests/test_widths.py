"""What gradcheck shows fits the terminal it is shown in, at 80, 100 and 200 columns of a real
pseudo-terminal: the vjp explanation never breaks a matrix row or cuts a header (its blocks are
stacked when they do not fit side by side), `check` tells every skip's reason, `gradcheck run`'s
summary keeps its names, border and times, and str(report) and assert_gradients (under pytest
and pytest-xdist) take the terminal's width."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.terminal import Shown, in_terminal

pytestmark = pytest.mark.slow  # a gradcheck process per width
ROOT = Path(__file__).resolve().parent.parent
WIDTHS = (80, 100, 200)
FULL_JACOBIAN = ("check", "fixtures/custom_gradient_full_jacobian.py:f", "-i", "[1.0, 2.0]")


def gradcheck_at(columns: int, *arguments: str, cwd: Path = ROOT) -> Shown:
    """A command's stdout in a terminal `columns` wide (its progress bars, on stderr, aside)."""
    return in_terminal([sys.executable, "-m", "gradcheck", *arguments], columns, cwd=cwd,
                       stderr_too=False)


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("columns", WIDTHS)
def test_the_vjp_explanation_is_laid_out_for_the_width(columns: int) -> None:
    shown = gradcheck_at(columns, "vjp", "fixtures/natgrad.py:expectation_to_meanvarsqrt",
                         "--upstream", "fixtures/natgrad_upstream.npz")
    assert shown.returncode == 0, shown.text
    explanation = shown.text[shown.text.index("eta1, shape (2,): what tape.gradient"):]
    assert shown.widest() <= columns and "…" not in explanation, shown.text
    # J of y['L'] by eta1, a 4 x 2 matrix: each row whole, on one line.
    for row in (r"-0\.25 +0\b", r"0\.625 +-0\.25", r"-0\.625 +1\.25"):
        assert re.search(row, shown.text), (row, shown.text)
    for header in ("J = tape.jacobian(y, eta1)", "rows: y, columns: eta1", "u (upstream)",
                   "output_gradients=u) = uᵀJ", "tape.gradient(y, eta2) * u",
                   "(the misconception)"):
        assert header in shown.text, header
    side_by_side = any("J = tape.jacobian(y, eta1)" in line and "tape.gradient(y, eta1) * u"
                       in line for line in shown.lines)
    assert side_by_side == (columns == 200)
    if columns < 200:
        assert "target y['L'] ─" in shown.text and "all targets (one call) ─" in shown.text
    # The words under the blocks wrap with their bullet's indent.
    assert "• y['L']: J is not diagonal" in shown.text


@pytest.fixture(scope="module")
def full_jacobian_checks() -> list[dict[str, object]]:
    done = subprocess.run([sys.executable, "-m", "gradcheck", *FULL_JACOBIAN, "--format", "json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    return list(json.loads(done.stdout)["checks"])


@pytest.mark.parametrize("columns", WIDTHS)
def test_check_tells_every_skip_and_failure_in_full_at_every_width(
        columns: int, full_jacobian_checks: list[dict[str, object]]) -> None:
    shown = gradcheck_at(columns, *FULL_JACOBIAN)
    assert shown.returncode == 1 and shown.widest() <= columns, shown.text
    told = [c for c in full_jacobian_checks if c["status"] in ("skip", "fail")]
    assert {c["status"] for c in told} == {"skip", "fail"}
    for check in told:
        assert _words(str(check["message"])) in _words(shown.text), (check, shown.text)
    assert "custom_gradient_full_jacobian.py:12" in shown.text


@pytest.mark.parametrize("columns", WIDTHS)
def test_the_run_summary_keeps_names_times_and_its_border(columns: int) -> None:
    shown = gradcheck_at(columns, "run", cwd=ROOT / "fixtures" / "ci_project")
    assert shown.returncode == 2 and shown.widest() <= columns, shown.text
    table = shown.lines[shown.lines.index("gradcheck run"):]
    rows = [line for line in table if line.startswith(("│", "┃"))]
    assert rows and all(line.endswith(("│", "┃")) for line in rows), shown.text
    named = {name: [line for line in rows if f" {name} " in line]
             for name in ("softplus", "moments", "clipped-identity", "missing-function")}
    assert all(lines and re.search(r"\d+\.\ds│$", lines[0]) for lines in named.values()), named
    assert "…" not in "\n".join(table)
    # The finding of the failing check, whole: in its column, or told under the table.
    finding = "grad_fn is off by a constant factor of 2 for input x"
    assert finding in _words(" ".join(line.strip("│┃ ") for line in table).replace("│", " "))


SCRIPT = """
import gradcheck
from fixtures.custom_gradient_full_jacobian import f
import numpy as np
print(gradcheck.check(f, np.array([1.0, 2.0])))
"""

PYTEST_FILE = """
import numpy as np
import gradcheck
from fixtures.custom_gradient_full_jacobian import f

def test_full_jacobian():
    gradcheck.assert_gradients(f, np.array([1.0, 2.0]), compiled=False)
"""


def test_print_report_takes_the_terminals_width() -> None:
    shown = in_terminal([sys.executable, "-c", SCRIPT], 80, cwd=ROOT, stderr_too=False)
    assert shown.returncode == 0 and "FAIL" in shown.text, shown.text
    assert shown.widest() <= 80, shown.text


@pytest.mark.parametrize("workers", ["0", "1"])
def test_assert_gradients_fits_pytests_terminal_with_or_without_xdist(workers: str,
                                                                      tmp_path: Path) -> None:
    test_file = tmp_path / "test_gradients.py"
    test_file.write_text(textwrap.dedent(PYTEST_FILE))
    shown = in_terminal([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", workers,
                         "-q", str(test_file), "--rootdir", str(tmp_path)], 80, cwd=ROOT,
                        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert shown.returncode == 1, shown.text
    message = [line for line in shown.lines if line.startswith("E ")]
    assert any("FAIL grad-shape" in line for line in message), shown.text
    assert max(len(line) for line in message) <= 80, "\n".join(message)
