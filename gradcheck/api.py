"""The Python API: gradcheck.check and gradcheck.assert_gradients."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from gradcheck.checks import ALL_KINDS, DEFAULT_MAX_MEMORY, CheckOptions, run_checks
from gradcheck.inputs import Arguments, name_arguments
from gradcheck.report import Report


def _upstream_specs(upstream: Any) -> tuple[Any, ...]:
    if upstream is None:
        return ()
    if isinstance(upstream, str):
        return (upstream,)
    if isinstance(upstream, Mapping):
        return ({key: np.asarray(value) for key, value in upstream.items()},)
    if isinstance(upstream, (list, tuple)):
        return tuple(u if isinstance(u, str) else np.asarray(u) for u in upstream)
    return (np.asarray(upstream),)


def check(
    f: Callable[..., Any],
    *args: Any,
    kwargs: Mapping[str, Any] | None = None,
    upstream: Any = None,
    atol: float | None = None,
    rtol: float | None = None,
    eps: float | None = None,
    mode: str = "auto",
    probes: int = 8,
    seed: int = 0,
    dtype: str = "auto",
    max_memory: int = DEFAULT_MAX_MEMORY,
    kinds: frozenset[str] | None = None,
) -> Report:
    """Check the gradients of f at the given arguments; never raises for a wrong gradient."""
    arguments = Arguments(tuple(args), dict(kwargs or {}), "gradcheck.check")
    named = name_arguments(f, arguments)
    options = CheckOptions(
        upstream=_upstream_specs(upstream), atol=atol, rtol=rtol, eps=eps, mode=mode,
        probes=probes, seed=seed, dtype=dtype, max_memory=max_memory,
        kinds=ALL_KINDS if kinds is None else frozenset(kinds),
    )
    label = getattr(f, "__qualname__", getattr(f, "__name__", repr(f)))
    return run_checks(f, named, options, label)


def assert_gradients(f: Callable[..., Any], *args: Any, **options: Any) -> Report:
    """Like check(), but raise AssertionError with the report table when a check fails."""
    report = check(f, *args, **options)
    if not report.ok:
        from gradcheck.render.text import render_text

        raise AssertionError("gradients of " + report.target + " are wrong\n" + render_text(report))
    return report
