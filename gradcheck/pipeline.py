"""From a TARGET and its input specifications to a Report: what the CLI and `run` share.

Light to import (the heavy modules load when a check runs), so that the command line can name
these functions in the jobs it sends to worker processes."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gradcheck.options import default

if TYPE_CHECKING:
    from gradcheck.load.inputs import Arguments
    from gradcheck.load.target import Target
    from gradcheck.options import CheckOptions
    from gradcheck.report import Report


def preimport() -> None:
    """Import TensorFlow and the modules a check needs, running no TensorFlow op (so that the
    process may still be forked)."""
    import gradcheck.diagnosis.diagnose  # noqa: F401
    import gradcheck.load.inputs  # noqa: F401
    import gradcheck.load.target  # noqa: F401
    import gradcheck.tf.instrument  # noqa: F401
    import gradcheck.tf.keras  # noqa: F401
    from gradcheck.tf.runtime import imported

    imported()


def preload(threads: int | None = None) -> None:
    """Import and start TensorFlow (with at most `threads` threads per pool) and what a check
    needs, so that a check's time is its own."""
    from gradcheck.tf.runtime import tensorflow

    preimport()
    tensorflow(threads)


@dataclass(frozen=True)
class TargetRequest:
    """A TARGET and the options that say how to call it (gradcheck.options' input group)."""

    target: str
    path: str = default("path")
    input_specs: tuple[str, ...] = default("input")
    shapes: tuple[str, ...] = default("shape")
    inputs_attr: str | None = default("inputs")
    upstream_specs: tuple[str, ...] = default("upstream")
    instrument: bool = default("instrument")


def check_request(
    request: TargetRequest,
    options: CheckOptions,
    import_context: Callable[[], AbstractContextManager[Any]] | None = None,
) -> Report:
    """Load, bind inputs, check. Raises GradcheckError subclasses for exit codes 2 and 3."""
    from gradcheck.load.inputs import parse_upstreams, resolve_arguments
    from gradcheck.load.target import load_attribute
    from gradcheck.tf.runtime import tensorflow

    upstream = parse_upstreams(request.upstream_specs)
    tensorflow()

    def arguments_for(target: Target) -> Arguments:
        return resolve_arguments(
            target.name, target.module,
            input_specs=request.input_specs, shapes=request.shapes, seed=options.seed,
            inputs_attr=request.inputs_attr,
            load_attribute=lambda spec: load_attribute(spec, request.path),
        )

    return check_target(request.target, request.path, replace(options, upstream=tuple(upstream)),
                        arguments_for, instrument=request.instrument,
                        import_context=import_context)


def check_target(
    spec: str,
    path: str,
    options: CheckOptions,
    arguments_for: Callable[[Target], Arguments],
    *,
    instrument: bool = True,
    import_context: Callable[[], AbstractContextManager[Any]] | None = None,
) -> Report:
    """Import TARGET, bind its arguments, diagnose (as check_callable does)."""
    from gradcheck.load.target import load_target

    target = load_target(spec, path, import_context or contextlib.nullcontext)
    return check_callable(target.function, lambda: arguments_for(target), options, spec,
                          instrument=instrument)


def check_callable(function: Callable[..., Any], arguments: Callable[[], Arguments],
                   options: CheckOptions, label: str, *, instrument: bool = True) -> Report:
    """A function, a Keras layer or model (called with training=True under --training), or
    a factory of one, at the given arguments; every custom gradient it calls is observed
    (however it was defined or imported) unless `instrument` is False."""
    from gradcheck.diagnosis.diagnose import diagnose
    from gradcheck.errors import LoadError
    from gradcheck.load.inputs import name_arguments
    from gradcheck.load.target import graph_mode_error
    from gradcheck.tf.instrument import observing_custom_gradients
    from gradcheck.tf.keras import keras_target
    from gradcheck.tf.runtime import eager_disabled

    if eager_disabled():
        raise LoadError(graph_mode_error(function))

    with observing_custom_gradients(instrument) as observer:
        function, notes = keras_target(function, options.training)
        report = diagnose(function, name_arguments(function, arguments()), options, label,
                          observer)
    return replace(report, notes=tuple(notes) + report.notes) if notes else report
