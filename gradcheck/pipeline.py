"""From a TARGET and its input specifications to a Report: what the CLI and `run` share."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any

from gradcheck.checks import CheckOptions
from gradcheck.diagnosis import diagnose
from gradcheck.inputs import name_arguments, parse_upstreams, resolve_arguments
from gradcheck.instrument import observing_custom_gradients
from gradcheck.report import Report
from gradcheck.target import Target, load_attribute, load_target
from gradcheck.tf_runtime import tensorflow


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
    with observing_custom_gradients(request.instrument) as observer:
        target: Target = load_target(request.target, request.path,
                                     import_context or contextlib.nullcontext,
                                     fresh=request.instrument)
        arguments = resolve_arguments(
            target.name, target.module,
            input_specs=request.input_specs, shapes=request.shapes, seed=options.seed,
            inputs_attr=request.inputs_attr,
            load_attribute=lambda spec: load_attribute(spec, request.path),
        )
        named = name_arguments(target.function, arguments)
        return diagnose(target.function, named, replace(options, upstream=tuple(upstream)),
                        request.target, observer)

