"""gradcheck: diagnose TensorFlow gradients (Jacobians, VJPs, custom_gradient, graph breaks)."""

from __future__ import annotations

import os
import sys

if sys.argv[:1] == ["-m"] and sys.path and sys.path[0] in ("", os.getcwd()):
    # `python -m gradcheck` puts the current folder first on sys.path: a typing.py or
    # inspect.py there would shadow the standard library for gradcheck's own imports. It
    # stays on the path, last.
    sys.path.append(sys.path.pop(0))

try:
    from typing import TYPE_CHECKING, Any

    from gradcheck import report as _report
    from gradcheck.render import display as _display
    from gradcheck.report import VERSION as __version__

    _report.install_views(_display)
except (ImportError, AttributeError) as exc:  # a user's file shadowing what gradcheck needs
    from gradcheck.shadowing import explain_import_failure

    explain_import_failure(exc)
    raise

if TYPE_CHECKING:
    from gradcheck.api import assert_gradients, check
    from gradcheck.report import CheckResult, Report
    from gradcheck.training.watch import Watch

__all__ = ["CheckResult", "Report", "__version__", "Watch", "assert_gradients", "check"]


def __getattr__(name: str) -> Any:
    # Lazy, so that `gradcheck --version` never imports NumPy-heavy or TensorFlow modules.
    if name in ("check", "assert_gradients"):
        from gradcheck import api

        return getattr(api, name)
    if name == "Watch":
        from gradcheck.training.watch import Watch

        return Watch
    if name in ("CheckResult", "Report"):
        from gradcheck import report

        return getattr(report, name)
    raise AttributeError(f"module 'gradcheck' has no attribute {name!r}")
