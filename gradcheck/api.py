"""The Python API: gradcheck.check and gradcheck.assert_gradients."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from gradcheck.check_settings import DEFAULT_RUN, CheckSettings
from gradcheck.load.inputs import Arguments, resolve_arguments
from gradcheck.options import ALL_KINDS, CheckOptions, default
from gradcheck.pipeline import check_callable, check_target, compared_with, load_any
from gradcheck.report import Report

# What check_here is called with before its options: f, args, kwargs, path, instrument.
Call = tuple[Callable[..., Any] | str, tuple[Any, ...], dict[str, Any], str, bool]


def _is_numeric_nest(value: Any) -> bool:
    """[2.0, 3.0] or [[1.0], [2.0]] is one upstream; a list of arrays is one per output."""
    if isinstance(value, (list, tuple)):
        return all(_is_numeric_nest(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _upstream_specs(upstream: Any) -> tuple[Any, ...]:
    if upstream is None:
        return ()
    if isinstance(upstream, str):
        return (upstream,)
    if isinstance(upstream, Mapping):
        return ({key: np.asarray(value) for key, value in upstream.items()},)
    if isinstance(upstream, (list, tuple)) and not _is_numeric_nest(upstream):
        return tuple(u if isinstance(u, str) else np.asarray(u) for u in upstream)
    return (np.asarray(upstream),)


def check(
    f: Callable[..., Any] | str,
    *args: Any,
    kwargs: Mapping[str, Any] | None = None,
    upstream: Any = None,
    atol: float | None = default("atol"),
    rtol: float | None = default("rtol"),
    eps: float | None = default("eps"),
    mode: str = default("mode"),
    probes: int = default("probes"),
    seed: int = default("seed"),
    dtype: str = default("dtype"),
    max_memory: int = default("max_memory"),
    kinds: frozenset[str] | None = None,
    path: str = default("path"),
    instrument: bool = default("instrument"),
    explain: bool = default("explain"),
    surrogates: tuple[str, ...] = default("surrogates"),
    wrt: str = default("wrt"),
    order: int = default("order"),
    loss_scale: float | str | None = default("loss_scale"),
    strategy: str | None = default("strategy"),
    against: str | None = default("against"),
    accumulate: int | None = default("accumulate"),
    training: bool = default("training"),
    compiled: bool = default("compiled"),
    keep_blocks: bool = False,
    isolate: bool = False,
    timeout: float | None = default("timeout"),
) -> Report:
    """Check the gradients of f at the given arguments; never raises for a wrong gradient.

    f may be a callable or a TARGET string ('module:function', 'file.py:function'); either way
    every tf.custom_gradient f calls is observed and also checked on its own, at its line.
    Without arguments, a TARGET's `<function>_inputs` provides them. `explain=True` adds
    what tape.gradient returns with and without output_gradients (Report.explain). `wrt`,
    `order`, `training`, `compiled`, `loss_scale`, `strategy`, `accumulate` and `against` mean
    what --wrt, --order, --training, --compiled/--no-compiled, --loss-scale, --strategy,
    --accumulate and --against mean;
    f may also be a saved model (a SavedModel directory, DIR:ATTR, or a .keras file);
    `keep_blocks=True` keeps the Jacobian blocks for report.plot().

    `isolate=True` runs the check in a worker process, which survives TensorFlow crashing
    (the check runs again without vectorisation) and can be stopped after `timeout` seconds;
    f and the arguments must then be picklable (a module-level function, or a TARGET), and a
    script that defines f needs the `if __name__ == "__main__":` guard, as multiprocessing does.
    """
    options = CheckOptions(  # validates every value, as for the command line
        upstream=_upstream_specs(upstream), atol=atol, rtol=rtol, eps=eps, mode=mode,
        probes=probes, seed=seed, dtype=dtype, max_memory=max_memory,
        kinds=ALL_KINDS if kinds is None else frozenset(kinds), explain=explain,
        surrogates=frozenset(surrogates), wrt=wrt, order=order, training=training,
        loss_scale=loss_scale, strategy=strategy, against=against,
        accumulate=accumulate,
        compiled=compiled, timeout=timeout,
    )
    call = (f, tuple(args), dict(kwargs or {}), path, instrument)
    return _check(call, options, CheckSettings(keep_blocks=keep_blocks), isolate)


def _check(call: Call, options: CheckOptions, settings: CheckSettings, isolate: bool) -> Report:
    """check() in a worker process, or in this one, which no time limit can stop."""
    if isolate:
        return _check_isolated(call, options, settings)
    if options.timeout is not None:
        raise ValueError("timeout= needs isolate=True (only a worker process can be stopped)")
    return check_here(*call, options, settings)


def check_here(f: Callable[..., Any] | str, args: tuple[Any, ...], kwargs: dict[str, Any],
               path: str, instrument: bool, options: CheckOptions,
               settings: CheckSettings = DEFAULT_RUN) -> Report:
    """check() in this process, with its options already gathered."""
    arguments = Arguments(args, kwargs, "gradcheck.check")
    if not isinstance(f, str):
        report = check_callable(f, lambda: arguments, options, settings, callable_label(f),
                                instrument=instrument)
        if options.against is None:
            return report
        original = load_any(options.against, path)[0]
        return replace(report, checks=report.checks + (
            compared_with(original, f, arguments, options),))
    given = arguments if args or kwargs else None
    return check_target(
        f, path, options,
        lambda target: given or resolve_arguments(target.name, target.module,
                                                  function=target.function), settings,
        instrument=instrument)


def callable_label(f: Callable[..., Any], qualified: bool = True) -> str:
    """How reports name a function object: its (qualified) name, `partial(name)` for a
    functools.partial, a Keras layer's or model's name; never a repr with its arguments'
    values or an address."""
    if isinstance(f, functools.partial):
        return f"partial({callable_label(f.func, qualified)})"
    for attribute in ("__qualname__", "__name__", "name") if qualified else ("__name__", "name"):
        name = getattr(f, attribute, None)
        if isinstance(name, str) and name:
            return name
    return type(f).__name__


def _check_isolated(call: Call, options: CheckOptions, settings: CheckSettings) -> Report:
    """check() in a worker process; its errors are raised here, as check() would raise them."""
    import pickle

    from gradcheck.processes.supervisor import Job, memory_cap, run_jobs

    f = call[0]
    try:
        pickle.dumps(call)
    except Exception as exc:
        raise TypeError("isolate=True sends f and its arguments to a worker process, so they"
                        " must be picklable (f a module-level function or a TARGET string):"
                        f" {exc}") from None
    name = f.rpartition(":")[2] if isinstance(f, str) else callable_label(f, qualified=False)
    target = f if isinstance(f, str) else callable_label(f)
    result = run_jobs([Job(check_here, call, options, name=name, target=target,
                           timeout=options.timeout, timeout_flag="timeout",
                           memory_limit=memory_cap(options.max_memory), settings=settings)])[0]
    if result.error is not None:
        raise result.error
    assert result.report is not None
    return result.report


def assert_gradients(f: Callable[..., Any] | str, *args: Any, **options: Any) -> Report:
    """Like check(), but raise AssertionError with the report table when a check fails.

    Takes check()'s arguments and options; returns the report when every check passes. The
    message is laid out for the terminal's width (pytest's, under pytest-xdist too).
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this frame
    report = check(f, *args, **options)
    if not report.ok:
        from gradcheck.render.display import text_width
        from gradcheck.render.text import render_text

        # Test runners indent the message: pytest by "E", its gutter and the caller's indent.
        table = render_text(report, width=text_width() - 8).rstrip("\n")
        raise AssertionError("gradients of " + report.target + " are wrong\n" + table)
    return report
