"""gradcheck: diagnose TensorFlow gradients (Jacobians, VJPs, custom_gradient, graph breaks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gradcheck.report import VERSION as __version__

if TYPE_CHECKING:
    from gradcheck.api import assert_gradients, check
    from gradcheck.report import CheckResult, Report
    from gradcheck.watch import Watch

__all__ = ["CheckResult", "Report", "__version__", "Watch", "assert_gradients", "check"]


def __getattr__(name: str) -> Any:
    # Lazy, so that `gradcheck --version` never imports NumPy-heavy or TensorFlow modules.
    if name in ("check", "assert_gradients"):
        from gradcheck import api

        return getattr(api, name)
    if name == "Watch":
        from gradcheck.watch import Watch

        return Watch
    if name in ("CheckResult", "Report"):
        from gradcheck import report

        return getattr(report, name)
    raise AttributeError(f"module 'gradcheck' has no attribute {name!r}")
