"""The bundled examples that `gradcheck demo` runs, each with the verdict it must get."""

from __future__ import annotations

import os
from collections.abc import Set
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradcheck.errors import GradcheckError
    from gradcheck.evidence import Location
    from gradcheck.report import Report

PACKAGE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class DemoCase:
    file: str
    function: str
    expect_ok: bool
    expect_check: str | None  # the check kind that must fail (or warn), if any
    story: str
    upstream: tuple[str, ...] = ()
    command: str = "check"


DEMO_CASES = (
    DemoCase("custom_gradient_correct.py", "f", True, None,
             "custom_gradient returning the VJP uᵀJ"),
    DemoCase("custom_gradient_full_jacobian.py", "f", False, "grad-shape",
             "grad_fn returns J * upstream, shape (2, 2) for a (2,) input"),
    DemoCase("variable_from_input.py", "f", False, "graph-break",
             "tf.Variable built from the input: gradient is None"),
    DemoCase("composed_custom_gradients.py", "f", False, "custom-gradient",
             "two custom gradients composed, only scaled_square is wrong: it is named"),
    DemoCase("custom_gradient_mistakes.py", "transposed", False, "custom-gradient",
             "grad_fn returns J·u instead of uᵀJ: named as transposed"),
    DemoCase("variables_missing_keyword.py", "f", False, "custom-gradient",
             "reads a tf.Variable, grad_fn lacks variables=: reported, not a crash"),
    DemoCase("stop_gradient_only_path.py", "f", False, "graph-break",
             "tf.stop_gradient on the only path: the line is shown"),
    DemoCase("numpy_round_trip.py", "f", False, "graph-break",
             ".numpy() round trip: the line is shown"),
    DemoCase("integer_cast_partial.py", "normalise", False, "graph-break",
             "integer cast on one of two paths: wrong Jacobian, cut located"),
    DemoCase("no_false_alarms.py", "f", True, None,
             "harmless casts, argmax and stop_gradient: no false alarm"),
    DemoCase("two_in_two_out.py", "f", True, None, "two inputs, two outputs"),
    DemoCase("dict_output.py", "moments", True, None, "dict of outputs"),
    DemoCase("float32_only.py", "f", True, None,
             "float32 constants inside: checked in float32, no false alarm"),
    DemoCase("gather_indexed_slices.py", "f", True, None,
             "tf.gather: IndexedSlices gradient, densified"),
    DemoCase("natgrad.py", "expectation_to_meanvarsqrt", True, "vjp",
             "natural-gradient VJP through (eta1, eta2) -> (m, chol): dL/deta1 = dL/dm"
             " - 2 (dL/deta2) m; Cholesky's symmetric-gradient convention is a warning",
             upstream=("natgrad_upstream.npz",), command="vjp"),
    DemoCase("hessian.py", "numpy_inside", False, "hessian",
             "grad_fn through .numpy(): first order passes, the Hessian is cut at its line",
             command="hessian"),
)


def fixtures_dir() -> Path:
    """The examples: inside an installed package, or the repository's fixtures/ folder."""
    installed = PACKAGE_DIR / "_fixtures"
    return installed if installed.is_dir() else PACKAGE_DIR.parent / "fixtures"


def upstream_specs(case: DemoCase, directory: Path) -> tuple[str, ...]:
    """Upstream files are named relative to the examples folder; other specs pass through."""
    return tuple(str(directory / spec) if (directory / spec).is_file() else spec
                 for spec in case.upstream)


def matches(case: DemoCase, ok: bool, failing_checks: Set[str]) -> bool:
    if case.expect_ok:
        return ok and (case.expect_check is None or case.expect_check in failing_checks)
    return not ok and (case.expect_check is None or case.expect_check in failing_checks)


def short_location(location: Location, directory: Path) -> str:
    """An example's line relative to the examples folder (installed examples live deep in
    site-packages); other locations as they are."""
    if location.line is None:
        return str(location)
    try:
        relative = os.path.relpath(location.path, directory)
    except ValueError:  # another drive (Windows)
        return str(location)
    return str(location) if relative.startswith("..") else f"{relative}:{location.line}"


def finding(report: Report, directory: Path) -> str:
    """The worst finding in one line: its kind, the example's line and the first clause of its
    message (whole: the column wraps it), or that every check passed."""
    worst = report.sorted_checks()[0] if report.checks else None
    if worst is None or worst.status == "pass":
        return "all checks pass"
    where = f" at {short_location(worst.location, directory)}" if worst.location else ""
    return f"{worst.check}{where}: {worst.headline}"


def common_error(errors: list[GradcheckError | None]) -> GradcheckError | None:
    """The one error that stopped every example (TensorFlow not installed, say): the demo
    then says it once, as any command would."""
    if not errors or any(error is None for error in errors):
        return None
    messages = {error.message for error in errors if error is not None}
    return errors[0] if len(messages) == 1 else None
