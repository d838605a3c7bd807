"""A training step's diagnosis, the same for gradcheck.Watch (on the live model, in the process
that trains) and `gradcheck replay` (on a snapshot, rebuilt only from code the user names)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gradcheck.check_settings import DEFAULT_RUN, CheckSettings

if TYPE_CHECKING:
    from gradcheck.evidence.location import Location
    from gradcheck.options import CheckOptions
    from gradcheck.report import Report

XY = ("x", "y", "sample_weight")
# A weight this large was driven there by updates (initialisers give values near 1).
DIVERGED = 1e6
# Standardised inputs rarely exceed this: beyond it, normalising them is advice worth giving.
UNIT_SCALE = 10.0


def step_options(trigger: str, mode: str | None = None,
                 timeout: float | None = None) -> CheckOptions:
    """What a step's diagnosis checks, by what triggered it. A non-finite step: the first op
    that turns finite values into non-finite ones (one forward and backward pass, whatever the
    model's size). Otherwise, or with a `mode` (fast, full), every check of the trainable
    weights; a stuck loss scale: of the gradient as the LossScaleOptimizer scales it."""
    from gradcheck.options import ALL_KINDS, CheckOptions
    from gradcheck.report import Kind

    kinds = (frozenset({Kind.NON_FINITE}) if mode is None and trigger.startswith("non-finite")
             else ALL_KINDS)
    return CheckOptions(kinds=kinds, wrt="variables", mode=mode or "fast", training=True,
                        compiled=False, timeout=timeout,
                        loss_scale="auto" if trigger == "loss-scale" else None)


def check_step(model: Any, loss_fn: Callable[..., Any] | None, batch: Sequence[Any],
               structure: str, options: CheckOptions, label: str,
               health: Mapping[str, Any] | None = None,
               settings: CheckSettings = DEFAULT_RUN, optimizer: Any = None,
               without_gradient: Sequence[str] = (),
               step_line: Location | None = None) -> Report:
    """The step's loss (`loss_fn(model, *batch)`, or the model's compiled loss at fit's x, y,
    sample_weight) at its batch and the model's weights as they are. Afterwards the model's
    variables, its metrics' and the random number generators are bitwise as they were. A
    batch holding NaN or inf is an InputError that names it (the data is at fault)."""
    from gradcheck.errors import InputError
    from gradcheck.load.inputs import Arguments, is_infinite_mask
    from gradcheck.options import SWEPT_KINDS
    from gradcheck.pipeline import check_callable
    from gradcheck.training.gate import train_step_loss
    from gradcheck.training.keras_snapshot import (
        batch_arrays,
        compiled_loss,
        own_train_step,
        training_loss,
    )
    from gradcheck.training.snapshot import non_finite_data
    from gradcheck.training.step_state import preserved

    arrays = batch_arrays(batch, structure)[1]
    if arrays and all(getattr(a, "ndim", 0) and a.shape[0] == 0 for a in arrays.values()):
        raise InputError("the step's batch is empty (0 rows; under a tf.distribute strategy, this"
                         " replica's shard): a mean over 0 samples is 0/0, which is the NaN;"
                         " average with tf.nn.compute_average_loss(per_example_loss,"
                         " global_batch_size=...) or batch with drop_remainder=True")
    bad_data = non_finite_data({name: array for name, array in arrays.items()
                                if not is_infinite_mask(array)})
    if bad_data:
        raise InputError(bad_data)
    options = _in_the_steps_dtype(options, arrays.values(), model)
    if loss_fn is None and own_train_step(model):
        loss_fn = train_step_loss  # the loss the user's train_step differentiates
    if loss_fn is None and not compiled_loss(model):
        raise InputError("the model has no compiled loss to diagnose the step with: give the"
                         " loss as the step computes it, loss_fn(model, *batch), to"
                         " gradcheck.Watch(loss_fn=...) or watch.step(..., loss_fn=...)")
    if loss_fn is None:
        named = {name: value for name, value in zip(XY, batch) if value is not None}
        nested = {name: value for name, value in named.items()
                  if isinstance(value, (list, tuple))}
        function: Callable[..., Any] = _bound(training_loss, nested, model)
        arguments = Arguments((model,), {name: value for name, value in named.items()
                                         if name not in nested}, "step")
    else:
        given = list(batch)
        while structure == "xy" and given and given[-1] is None:  # fit's y, sample_weight
            given.pop()
        function = _bound(loss_fn, {}, model)
        arguments = Arguments((model, *given), {}, "step")
    with preserved(model, moves_weights=bool(options.kinds & SWEPT_KINDS)):
        report = check_callable(function, lambda: arguments, options, settings, label)
    diverged = functools.cache(
        lambda: _diverged(model, optimizer, arrays if structure == "xy" else None))
    report = replace(report, notes=tuple(n for n in report.notes if not _machinery(n)),
                     checks=tuple(_untrained(_of_the_loss(c, diverged), model, without_gradient,
                                             lambda: function(*arguments.args,
                                                              **arguments.kwargs))
                                  for c in report.checks))
    if without_gradient and structure == "args" and not any(c.failed for c in report.checks):
        report = replace(report, checks=report.checks + _not_recorded(without_gradient,
                                                                       step_line))
    report = _previous_update_tried(report, model, optimizer, function, arguments)
    if loss_fn is None and structure == "xy":
        report = _swap_tried(report, model, batch)
    if health is None:
        return report
    from gradcheck.kinds.health.check import health_results

    found = health_results([str(n) for n in health["names"].tolist()], health["norms"],
                           health["zeros"])
    return replace(report, checks=report.checks + tuple(found))


def _in_the_steps_dtype(options: CheckOptions, arrays: Iterable[Any], model: Any
                        ) -> CheckOptions:
    """Only locating a NaN, with a float32 batch and model: the step in float32, as it ran.
    Promotion to float64 (which a float32 model undoes at its inputs) would cost the
    diagnosis a taped call and backward pass of the model to choose between the two."""
    from gradcheck.report import Kind
    from gradcheck.targets.keras import compute_dtype

    floats = {str(a.dtype) for a in arrays if getattr(a, "dtype", None) is not None
              and a.dtype.kind in "fc"}
    if options.dtype != "auto" or not options.kinds <= {Kind.NON_FINITE} or floats != {
            "float32"} or compute_dtype(model) not in (None, "float32"):
        return options
    return replace(options, dtype="float32")


def _bound(function: Callable[..., Any], fixed: Mapping[str, Any], model: Any
           ) -> Callable[..., Any]:
    """The step's loss, its weights named inside `model` (as replay's reloaded model names
    them), with a multi-input model's [left, right] batch bound as it is (passed as an
    argument, a list of equal arrays would be read as one array)."""
    from gradcheck.engine.variables import STEP_MODEL

    def bound(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **fixed, **kwargs)

    bound.__name__ = bound.__qualname__ = getattr(function, "__name__", "loss")
    bound.__signature__ = _without(function, fixed)  # type: ignore[attr-defined]
    bound.__wrapped__ = function  # type: ignore[attr-defined]
    setattr(bound, STEP_MODEL, model)
    return bound


def _without(function: Callable[..., Any], fixed: Mapping[str, Any]) -> Any:
    import inspect

    signature = inspect.signature(function)
    return signature.replace(parameters=[p for name, p in signature.parameters.items()
                                         if name not in fixed])


def _not_recorded(weights: Sequence[str], step_line: Location | None) -> tuple[Any, ...]:
    """A custom loop's weights that its own tape gave no gradient, though the step's loss_fn
    (run under a tape by the diagnosis) depends on every one of them: the tape it handed to
    Watch never saw the forward pass."""
    from gradcheck.evidence.gradients import NotRecorded
    from gradcheck.report import CheckResult, Kind, Status

    at = str(step_line) if step_line is not None else None
    return tuple(CheckResult(Kind.CONNECTED, Status.FAIL, input=name, location=step_line,
                             evidence=NotRecorded(step_at=at)) for name in weights)


def _untrained(result: Any, model: Any, without_gradient: Sequence[str],
               run: Callable[[], Any]) -> Any:
    """A weight the step gave no gradient, which the loss does not depend on, is no "pass":
    it never trains; where the user's layer read it once outside the step, that line."""
    from gradcheck.evidence.fast import ProjectedUnconnected
    from gradcheck.evidence.gradients import Independent, UntrainedWeight
    from gradcheck.evidence.location import Location
    from gradcheck.report import Kind, Status
    from gradcheck.training.keras_snapshot import dropped_output_line, read_outside_the_step

    if result.check != Kind.CONNECTED or result.input not in without_gradient or not isinstance(
            result.evidence, (Independent, UntrainedWeight, ProjectedUnconnected)):
        return result
    read_at = read_outside_the_step(model, result.input)
    if read_at is not None:
        path, _, line = read_at.rpartition(":")
        return replace(result, status=Status.FAIL, location=Location(path, int(line)),
                       evidence=UntrainedWeight(never_read=True, read_at=read_at))
    dropped_at = dropped_output_line(model, result.input, run)
    if dropped_at is None:
        return replace(result, status=Status.WARN, evidence=UntrainedWeight(never_read=True))
    return replace(result, status=Status.FAIL, location=dropped_at,
                   evidence=UntrainedWeight(never_read=True, dropped_at=str(dropped_at)))


def _diverged(model: Any, optimizer: Any, arrays: Mapping[str, Any] | None) -> Any:
    """The trainable weight of largest magnitude, when earlier updates made it huge, and the
    scale of fit's inputs (x, in `arrays`)."""
    import numpy as np

    from gradcheck.evidence.causes import DivergedWeight
    from gradcheck.training.keras_snapshot import largest_weight

    found = largest_weight(model)
    if found is None or not found[1] >= DIVERGED:
        return None
    optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
    rate = getattr(optimizer, "learning_rate", None)
    try:
        learning_rate = float(rate) if rate is not None else None
    except (TypeError, ValueError):  # a schedule
        learning_rate = None
    inputs = [np.abs(a).max(initial=0.0) for name, a in (arrays or {}).items()
              if (name == "x" or name.startswith("x/")) and getattr(a, "dtype", None) is not None
              and a.dtype.kind == "f"]
    largest = float(max(inputs)) if inputs else 0.0
    return DivergedWeight(found[0], found[1], type(optimizer).__name__ if optimizer else "",
                          learning_rate, largest <= UNIT_SCALE if inputs else None, largest)


def _of_the_loss(result: Any, diverged: Callable[[], Any]) -> Any:
    """A finding about the function's output speaks of the step's loss; a non-finite value
    made from a huge argument, when a weight is huge, names it and the optimizer behind it
    (`diverged()`, the weights scanned only for such a value)."""
    from gradcheck.evidence.causes import FirstNonFinite
    from gradcheck.evidence.non_finite import NonFiniteSeen

    evidence = result.evidence
    if isinstance(evidence, NonFiniteSeen) and not evidence.gradient:
        result = replace(result, evidence=replace(evidence, name="the loss"))
    facts = result.cause.facts if result.cause is not None else None
    # An op without elementwise arguments (MatMul, a convolution) turns finite inputs into
    # inf only by overflowing: with a huge weight, that is the divergence too.
    if isinstance(facts, FirstNonFinite) and (
            not facts.first.arguments or any(abs(a) >= DIVERGED for a in facts.first.arguments)
    ) and (found := diverged()) is not None:
        result = replace(result, cause=replace(result.cause,
                                               facts=replace(facts, diverged=found)))
    return result


def _first_non_finite(report: Report) -> Any:
    """The report's first non-finite finding whose cause names the first op, or None."""
    from gradcheck.evidence.causes import FirstNonFinite
    from gradcheck.report import Kind

    return next((c for c in report.checks if c.check == Kind.NON_FINITE and c.cause is not None
                 and isinstance(c.cause.facts, FirstNonFinite)), None)


def _sourced(report: Report, finding: Any, source: Any) -> Report:
    """The report with `finding`'s cause given `source` (which then explains it)."""
    cause = replace(finding.cause, facts=replace(finding.cause.facts, source=source,
                                                 diverged=None))
    return replace(report, checks=tuple(replace(c, cause=cause) if c is finding else c
                                        for c in report.checks))


def _previous_update_tried(report: Report, model: Any, optimizer: Any,
                           function: Callable[..., Any], arguments: Any) -> Report:
    """A non-finite step whose source the graph did not show: the previous update, when it
    moved a weight far more than the learning rate, recomputed with another epsilon or
    learning rate and the step run again with it; else a learning-rate schedule that spiked."""
    from gradcheck.training.step_state import preserved
    from gradcheck.training.trials import adam_like, previous_update, schedule_spike

    first = _first_non_finite(report)
    if first is None or (first.cause.facts.source is not None
                         and first.cause.facts.source.repaired):
        return report
    optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)
    updated = None
    if adam_like(optimizer):  # else nothing runs the step: no copy of the variables to keep
        with preserved(model):
            updated = previous_update(model, optimizer,
                                      lambda: function(*arguments.args, **arguments.kwargs))
    found = updated or schedule_spike(optimizer)
    return report if found is None else _sourced(report, first, found)


def _swap_tried(report: Report, model: Any, batch: Sequence[Any]) -> Report:
    """A compiled loss whose first non-finite op reads the labels as they are: the loss called
    with its arguments the other way round, on the step."""
    from gradcheck.evidence.causes.paths import LABELS
    from gradcheck.training.step_state import preserved
    from gradcheck.training.trials import swapped_arguments

    first = _first_non_finite(report)
    if first is None or len(batch) < 2 or first.cause.facts.source is not None \
            or first.cause.facts.first.fed_by not in LABELS:
        return report
    with preserved(model):
        found = swapped_arguments(model, batch[0], batch[1], first.cause.facts.first.fed_by)
    return report if found is None else _sourced(report, first, found)


def _machinery(note: Any) -> bool:
    """Notes on how gradcheck called the loss (the batch not differentiated, the model passed
    through, the dtype and mode it chose): a step's report speaks of the model and its weights."""
    from gradcheck.evidence import notes

    return isinstance(note, (notes.LeftOut, notes.PassedThrough, notes.ReturnsLower,
                             notes.RoundsToFloat32, notes.ModeReason, notes.FastModeUsed,
                             notes.CalledTraining, notes.PointByPoint))
