"""gradcheck: diagnose TensorFlow gradients (Jacobians, VJPs, custom_gradient, graph breaks).

`check` and `assert_gradients` check a function's gradients at a point; `Watch` catches the step
where training breaks; a `Report` (its `checks`, each a `CheckResult`) is what they find. The
names are imported on first use, so that `import gradcheck` stays fast and never imports
TensorFlow.
"""

from __future__ import annotations

import os as _os
import sys as _sys

if _sys.argv[:1] == ["-m"] and _sys.path and _sys.path[0] in ("", _os.getcwd()):
    # `python -m gradcheck` puts the current folder first on sys.path: a typing.py or
    # inspect.py there would shadow the standard library for gradcheck's own imports. It
    # stays on the path, last.
    _sys.path.append(_sys.path.pop(0))

import typing as _typing  # noqa: E402 - after the current folder moved: a typing.py there

try:
    from gradcheck import report as _report
    from gradcheck.render import display as _display
    from gradcheck.report import VERSION as __version__

    _report.install_views(_display)
except (ImportError, AttributeError) as exc:  # a user's file shadowing what gradcheck needs
    from gradcheck.shadowing import explain_import_failure

    explain_import_failure(exc)
    raise

if _typing.TYPE_CHECKING:
    from gradcheck.api import assert_gradients, check
    from gradcheck.report import CheckResult, Report
    from gradcheck.training.watch import Watch

__all__ = ["CheckResult", "Report", "Watch", "__version__", "assert_gradients", "check"]


def __getattr__(name: str) -> _typing.Any:
    # Lazy, so that `gradcheck --version` never imports NumPy-heavy or TensorFlow modules; once
    # imported, a name is the module's own (documentation tools read the module's __dict__).
    import importlib

    where = {"check": "api", "assert_gradients": "api", "Watch": "training.watch",
             "CheckResult": "report", "Report": "report"}.get(name)
    if where is None:
        raise AttributeError(f"module 'gradcheck' has no attribute {name!r}")
    value = globals()[name] = getattr(importlib.import_module(f"gradcheck.{where}"), name)
    return value


def __dir__() -> list[str]:
    """The public names (what an editor or a notebook completes), not the imported modules."""
    return sorted(__all__)
