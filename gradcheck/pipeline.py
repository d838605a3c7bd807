"""From a TARGET and its input specifications to a Report: what the CLI and `run` share.

Light to import (the heavy modules load when a check runs), so that the command line can name
these functions in the jobs it sends to worker processes."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gradcheck.check_settings import DEFAULT_RUN, CheckSettings
from gradcheck.options import default

if TYPE_CHECKING:
    from gradcheck.evidence.notes import Note
    from gradcheck.load.inputs import Arguments
    from gradcheck.options import CheckOptions
    from gradcheck.report import Report
    from gradcheck.targets.modules import Target


def preimport() -> None:
    """Import TensorFlow and the modules a check needs, running no TensorFlow op (so that the
    process may still be forked)."""
    import gradcheck.diagnosis.diagnose  # noqa: F401
    import gradcheck.engine.instrument  # noqa: F401
    import gradcheck.load.inputs  # noqa: F401
    import gradcheck.targets.keras  # noqa: F401
    import gradcheck.targets.modules  # noqa: F401
    from gradcheck.engine.runtime import imported

    imported()


def preload(threads: int | None = None) -> None:
    """Import TensorFlow (with at most `threads` threads per pool) and what a check needs, so
    that a check's time is its own; TensorFlow starts (its first op) only once the user's module
    is imported, which may configure its devices (every tf.distribute example does)."""
    from gradcheck.engine.runtime import configure

    preimport()
    configure(threads)


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
    settings: CheckSettings = DEFAULT_RUN,
    *,
    import_context: Callable[[], AbstractContextManager[Any]] | None = None,
) -> Report:
    """Load, bind inputs, check. Raises GradcheckError subclasses for exit codes 2 and 3."""
    from gradcheck.load.inputs import parse_upstreams, resolve_arguments
    from gradcheck.targets.keras import input_shapes
    from gradcheck.targets.modules import load_attribute

    upstream = parse_upstreams(request.upstream_specs)
    if options.strategy and options.strategy.startswith("mirrored"):  # before TensorFlow starts
        from gradcheck.kinds.strategy.check import parse_strategy
        from gradcheck.kinds.strategy.tf import provide_replicas

        provide_replicas(parse_strategy(options.strategy))

    def arguments_for(target: Target) -> Arguments:
        return resolve_arguments(
            target.name, target.module,
            input_specs=request.input_specs, shapes=request.shapes, seed=options.seed,
            inputs_attr=request.inputs_attr,
            load_attribute=lambda spec: load_attribute(spec, request.path),
            declared_shapes=target.declared_shapes or input_shapes(target.function),
            function=target.function,
        )

    return check_target(request.target, request.path, replace(options, upstream=tuple(upstream)),
                        arguments_for, settings, instrument=request.instrument,
                        import_context=import_context)


def load_any(spec: str, path: str,
             import_context: Callable[[], AbstractContextManager[Any]] | None = None,
             ) -> tuple[Target, tuple[str, ...]]:
    """TARGET's callable: a function by `module:attr`, or a saved model (a SavedModel
    directory, DIR:ATTR, a .keras file) with the functions TensorFlow imported without their
    custom gradients."""
    from gradcheck.targets.modules import Target, load_target
    from gradcheck.targets.saved_files import saved_target

    saved = saved_target(spec)
    if saved is None:
        return load_target(spec, path, import_context or contextlib.nullcontext), ()
    from gradcheck.targets.saved_models import load_saved

    loaded = load_saved(saved)
    return Target(spec, loaded.function, None, saved.name,
                  tuple(shape for _, shape in loaded.input_shapes)), loaded.unsaved_gradients


def check_target(
    spec: str,
    path: str,
    options: CheckOptions,
    arguments_for: Callable[[Target], Arguments],
    settings: CheckSettings,
    *,
    instrument: bool = True,
    import_context: Callable[[], AbstractContextManager[Any]] | None = None,
) -> Report:
    """Import TARGET (or load the saved model it names), bind its arguments, diagnose (as
    check_callable does); a saved model whose custom gradients were lost and whose gradient
    therefore fails gets that finding instead; --against adds the against check (a .keras
    file's custom classes are those the --against TARGET's module registers)."""
    from gradcheck.report import Report

    # The original first: its module registers the custom classes a .keras file names.
    original = None if options.against is None else load_any(options.against, path,
                                                             import_context)[0]
    target, unsaved = load_any(spec, path, import_context)
    arguments = arguments_for(target)
    found = _vjp(target.function, arguments, options) if unsaved or options.against else None
    if found is not None and unsaved and found.missing_op is not None:
        from gradcheck.kinds.against.check import unsaved_gradients_result

        report = Report(spec, (), (), (unsaved_gradients_result(unsaved, found.missing_op),))
    else:
        report = check_callable(target.function, lambda: arguments, options, settings, spec,
                                instrument=instrument)
    if original is None or found is None:
        return report
    return replace(report, checks=report.checks + (
        compared_with(original, target.function, arguments, options, unsaved, found),))


def compared_with(original: Target, function: Callable[..., Any], arguments: Arguments,
                  options: CheckOptions, unsaved: tuple[str, ...] = (), found: Any = None
                  ) -> Any:
    """The against check's result: FUNCTION's values and VJP against ORIGINAL's."""
    from gradcheck.kinds.against.check import against_result

    found = found if found is not None else _vjp(function, arguments, options)
    return against_result(found, _vjp(original.function, arguments, options), original.spec,
                          unsaved)


def _vjp(function: Callable[..., Any], arguments: Arguments, options: CheckOptions) -> Any:
    from gradcheck.kinds.against.tf import vjp_at
    from gradcheck.load.inputs import name_arguments

    names = [a.name for a in name_arguments(function, arguments) if a.position is not None]
    return vjp_at(function, arguments.args, arguments.kwargs, names, options.seed)


def check_callable(function: Callable[..., Any], arguments: Callable[[], Arguments],
                   options: CheckOptions, settings: CheckSettings, label: str, *,
                   instrument: bool = True) -> Report:
    """A function, a Keras layer or model (called with training=True under --training), or
    a factory of one, at the given arguments; every custom gradient it calls is observed
    (however it was defined or imported) unless `instrument` is False."""
    from gradcheck.diagnosis.diagnose import diagnose
    from gradcheck.engine.instrument import observing_custom_gradients
    from gradcheck.engine.runtime import eager_disabled
    from gradcheck.errors import FunctionError, LoadError
    from gradcheck.load.inputs import name_arguments
    from gradcheck.targets.keras import keras_target
    from gradcheck.targets.modules import graph_mode_error

    if eager_disabled():
        raise LoadError(graph_mode_error(function))

    notes: list[Note] = []
    try:
        with observing_custom_gradients(instrument) as observer:
            target, notes = keras_target(function, options.training)
            report = diagnose(target, name_arguments(target, arguments()), options, settings,
                              label, observer)
    except FunctionError:
        if not _built_in_float64(notes):
            raise
        # A model built under the float64 policy whose call mixes in float32 tensors of its
        # own (tf.zeros(units) in call): gradcheck's choice, so built again in its own dtype.
        with observing_custom_gradients(instrument) as observer:
            target, notes = keras_target(function, options.training, float64=False)
            report = diagnose(target, name_arguments(target, arguments()), options, settings,
                              label, observer)
    return replace(report, notes=tuple(notes) + report.notes) if notes else report


def _built_in_float64(notes: Sequence[Note]) -> bool:
    from gradcheck.evidence.notes import FactoryPolicy

    return any(isinstance(note, FactoryPolicy) and note.float64 for note in notes)
