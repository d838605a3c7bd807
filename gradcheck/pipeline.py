"""From a TARGET and its input specifications to a Report: what the CLI and `run` share."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any

from gradcheck.diagnosis.diagnose import diagnose
from gradcheck.load.inputs import Arguments, name_arguments, parse_upstreams, resolve_arguments
from gradcheck.load.target import Target, load_attribute, load_target
from gradcheck.options import CheckOptions
from gradcheck.report import Report
from gradcheck.tf.instrument import observing_custom_gradients
from gradcheck.tf.keras import keras_target
from gradcheck.tf.runtime import tensorflow


@dataclass(frozen=True)
class TargetRequest:
    target: str
    path: str = "."
    input_specs: tuple[str, ...] = ()
    shapes: tuple[str, ...] = ()
    inputs_attr: str | None = None
    upstream_specs: tuple[str, ...] = ()
    instrument: bool = True


def check_request(
    request: TargetRequest,
    options: CheckOptions,
    import_context: Callable[[], AbstractContextManager[Any]] | None = None,
) -> Report:
    """Load, bind inputs, check. Raises GradcheckError subclasses for exit codes 2 and 3."""
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
    """Import TARGET with its custom gradients observed, bind its arguments, diagnose."""
    with observing_custom_gradients(instrument) as observer:
        target = load_target(spec, path, import_context or contextlib.nullcontext,
                             fresh=instrument)
        function, notes = keras_target(target.function, options.training)
        named = name_arguments(function, arguments_for(target))
        report = diagnose(function, named, options, spec, observer)
        return replace(report, notes=tuple(notes) + report.notes) if notes else report

