"""A training step's diagnosis, the same for gradcheck.Watch (on the live model, in the process
that trains) and `gradcheck replay` (on a snapshot, rebuilt only from code the user names)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gradcheck.check_settings import DEFAULT_RUN, CheckSettings

if TYPE_CHECKING:
    from gradcheck.options import CheckOptions
    from gradcheck.report import Report
    from gradcheck.training.snapshot import Snapshot

XY = ("x", "y", "sample_weight")
# A weight this large was driven there by updates (initialisers give values near 1).
DIVERGED = 1e6


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
               without_gradient: Sequence[str] = ()) -> Report:
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

    bad_data = non_finite_data({name: array for name, array in
                                batch_arrays(batch, structure)[1].items()
                                if not is_infinite_mask(array)})
    if bad_data:
        raise InputError(bad_data)
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
    diverged = _diverged(model, optimizer)
    report = replace(report, notes=tuple(n for n in report.notes if not _machinery(n)),
                     checks=tuple(_untrained(_of_the_loss(c, diverged), model, without_gradient)
                                  for c in report.checks))
    report = _previous_update_tried(report, model, optimizer, function, arguments)
    if health is None:
        return report
    from gradcheck.kinds.health.check import health_results

    found = health_results([str(n) for n in health["names"].tolist()], health["norms"],
                           health["zeros"])
    return replace(report, checks=report.checks + tuple(found))


@dataclass(frozen=True)
class Replay:
    """A snapshot to replay and the code the user names to rebuild its step: `model` and `loss`
    (MODULE:FUNCTION, imported from `path`), or `trust` in what the snapshot names."""

    snapshot: str
    path: str = "."
    trust: bool = False
    model: str | None = None
    loss: str | None = None


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


def _untrained(result: Any, model: Any, without_gradient: Sequence[str]) -> Any:
    """A weight the step gave no gradient, which the loss does not depend on, is no "pass":
    it never trains; where the user's layer read it once outside the step, that line."""
    from gradcheck.evidence.fast import ProjectedUnconnected
    from gradcheck.evidence.gradients import Independent, UntrainedWeight
    from gradcheck.evidence.location import Location
    from gradcheck.report import Kind, Status
    from gradcheck.training.keras_snapshot import read_outside_the_step

    if result.check != Kind.CONNECTED or result.input not in without_gradient or not isinstance(
            result.evidence, (Independent, UntrainedWeight, ProjectedUnconnected)):
        return result
    read_at = read_outside_the_step(model, result.input)
    if read_at is None:
        return replace(result, status=Status.WARN, evidence=UntrainedWeight(never_read=True))
    path, _, line = read_at.rpartition(":")
    return replace(result, status=Status.FAIL, location=Location(path, int(line)),
                   evidence=UntrainedWeight(never_read=True, read_at=read_at))


def _diverged(model: Any, optimizer: Any) -> Any:
    """The trainable weight of largest magnitude, when earlier updates made it huge."""
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
    return DivergedWeight(found[0], found[1], type(optimizer).__name__ if optimizer else "",
                          learning_rate)


def _of_the_loss(result: Any, diverged: Any) -> Any:
    """A finding about the function's output speaks of the step's loss; a non-finite value
    made from a huge argument, when a weight is huge, names it and the optimizer behind it."""
    from gradcheck.evidence.causes import FirstNonFinite
    from gradcheck.evidence.non_finite import NonFiniteSeen

    evidence = result.evidence
    if isinstance(evidence, NonFiniteSeen) and not evidence.gradient:
        result = replace(result, evidence=replace(evidence, name="the loss"))
    facts = result.cause.facts if result.cause is not None else None
    if diverged is not None and isinstance(facts, FirstNonFinite) and any(
            abs(a) >= DIVERGED for a in facts.first.arguments):
        result = replace(result, cause=replace(result.cause,
                                               facts=replace(facts, diverged=diverged)))
    return result


def _previous_update_tried(report: Report, model: Any, optimizer: Any,
                           function: Callable[..., Any], arguments: Any) -> Report:
    """A non-finite step whose source the graph did not show: the previous update, when it
    moved a weight far more than the learning rate, recomputed with another epsilon or
    learning rate and the step run again with it."""
    from gradcheck.evidence.causes import FirstNonFinite
    from gradcheck.report import Kind
    from gradcheck.training.step_state import preserved
    from gradcheck.training.trials import previous_update

    first = next((c for c in report.checks if c.check == Kind.NON_FINITE and c.cause is not None
                  and isinstance(c.cause.facts, FirstNonFinite)), None)
    if first is None or (first.cause.facts.source is not None
                         and first.cause.facts.source.repaired):
        return report
    optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)
    with preserved(model):
        found = previous_update(model, optimizer,
                                lambda: function(*arguments.args, **arguments.kwargs))
    if found is None:
        return report
    cause = replace(first.cause, facts=replace(first.cause.facts, source=found, diverged=None))
    return replace(report, checks=tuple(replace(c, cause=cause) if c is first else c
                                        for c in report.checks))


def _machinery(note: Any) -> bool:
    """Notes on how gradcheck called the loss (the batch not differentiated, the model passed
    through, the dtype and mode it chose): a step's report speaks of the model and its weights."""
    from gradcheck.evidence import notes

    return isinstance(note, (notes.LeftOut, notes.PassedThrough, notes.ReturnsLower,
                             notes.RoundsToFloat32, notes.ModeReason, notes.FastModeUsed,
                             notes.CalledTraining, notes.PointByPoint))


def check_snapshot(replay: Replay, options: CheckOptions,
                   settings: CheckSettings = DEFAULT_RUN) -> Report:
    """A snapshot's step checked as Watch checked it live: the model from the user's factory,
    else its model.keras in Keras' safe mode (with the user's classes and its Lambda layers only
    when trusted); the loss from the user's function, the compiled loss, or (when trusted) the
    function the snapshot names. No file of the snapshot names code that runs."""
    from gradcheck.training.snapshot import (
        BATCH_FILE,
        HEALTH_FILE,
        load_arrays,
        read_snapshot,
        unflatten_batch,
    )

    directory, path, trust = replay.snapshot, replay.path, replay.trust
    snapshot = read_snapshot(directory)
    folder = Path(directory)
    batch = unflatten_batch(snapshot.batch_keys, load_arrays(folder / BATCH_FILE))
    if snapshot.batch_structure == "xy":
        named = dict(zip(snapshot.batch_keys, batch))
        batch = [named.get(name) for name in XY]
    loss_fn = _loss(snapshot, folder, path, trust, replay.loss)
    model = _model(snapshot, folder, path, trust, replay.model, batch)
    health = load_arrays(folder / HEALTH_FILE) if HEALTH_FILE in snapshot.files else None
    label = f"{directory} (step {snapshot.step}: {snapshot.trigger.message})"
    return check_step(model, loss_fn, batch, snapshot.batch_structure, options, label, health,
                      settings)


def _refusal(folder: Path, what: str) -> Exception:
    from gradcheck.errors import LoadError
    from gradcheck.training.snapshot import REPORT_TEXT

    report = folder / REPORT_TEXT
    made = f"; the diagnosis made in training is in {report}" if report.is_file() else ""
    return LoadError(f"snapshot {folder}: {what}{made}")


def _loss(snapshot: Snapshot, folder: Path, path: str, trust: bool,
          loss_spec: str | None) -> Callable[..., Any] | None:
    from gradcheck.targets.modules import load_attribute

    if loss_spec is not None:
        function: Callable[..., Any] = load_attribute(loss_spec, path)
        return function
    loss = snapshot.loss
    if loss.get("kind") == "compiled":
        return None
    module, qualname = str(loss.get("module", "")), str(loss.get("qualname", ""))
    if _unimportable(module, qualname):
        raise _refusal(folder, f"its loss {qualname or '?'} was defined {_where(module, qualname)},"
                               " which replay cannot import without running the training: pass"
                               " --loss MODULE:FUNCTION, a loss_fn(model, *batch) defined in a"
                               " module that does not train when imported")
    if not trust:
        raise _refusal(folder, f"its loss is {module}:{qualname}, code replay runs only when you"
                               f" say so: pass --loss {module}:{qualname} (or --trust, for a"
                               " snapshot you made)")
    function = load_attribute(f"{module}:{qualname}", path)
    return function


def _unimportable(module: str, qualname: str) -> bool:
    return (not module or module == "__main__" or "<" in qualname
            or not all(part.isidentifier() for part in module.split(".")))


def _where(module: str, qualname: str) -> str:
    if "<lambda>" in qualname:
        return "as a lambda"
    if "<locals>" in qualname:
        return "inside a function"
    if module == "__main__":
        return "in the script or notebook that trained (__main__)"
    return f"in {module!r}"


def _model(snapshot: Snapshot, folder: Path, path: str, trust: bool, model_spec: str | None,
           batch: Sequence[Any]) -> Any:
    from gradcheck.errors import LoadError
    from gradcheck.targets.modules import import_module, load_attribute
    from gradcheck.training.keras_snapshot import (
        assign_weights,
        load_model,
        load_weights,
        rebind_lambdas,
    )
    from gradcheck.training.snapshot import MODEL_FILE, WEIGHTS_FILE, load_arrays

    if model_spec is not None:
        model = load_attribute(model_spec, path)()
        if snapshot.batch_structure == "xy" and not getattr(model, "built", True):
            model(batch[0])  # a subclassed model builds its weights at its first call
        try:
            if WEIGHTS_FILE in snapshot.files:
                assign_weights(model, load_arrays(folder / WEIGHTS_FILE))
            else:
                load_weights(model, folder / MODEL_FILE)
        except (ValueError, KeyError) as exc:
            raise LoadError(f"snapshot {folder}: the model {model_spec} builds is not the one"
                            f" that trained ({exc})") from None
        return model
    if MODEL_FILE not in snapshot.files:
        why = snapshot.diagnosis.get("model", "a subclassed model or a tf.Module")
        raise _refusal(folder, f"its model could not be saved as .keras in training ({why}):"
                               " pass --model"
                               " MODULE:FUNCTION, a function that builds it (its weights are"
                               f" in {WEIGHTS_FILE})")
    custom = _custom_objects(snapshot, folder, path, trust)
    modules = [import_module(entry["module"], path) for entry in snapshot.modules
               if trust and not _unimportable(entry["module"], "")]
    try:
        model = load_model(snapshot.keras, folder / MODEL_FILE, custom, safe_mode=not trust)
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        if "safe_mode" in str(exc) or "lambda" in str(exc).lower():
            raise _refusal(folder, "its model has a Lambda layer, whose code Keras' safe mode"
                                   " does not load: pass --trust (for a snapshot you made) or"
                                   " --model MODULE:FUNCTION") from None
        raise _refusal(folder, f"its model could not be reloaded ({type(exc).__name__}:"
                               f" {first}); pass --model MODULE:FUNCTION, a function that"
                               " builds it") from None
    missing = rebind_lambdas(model, modules)
    if missing:
        raise _refusal(folder, f"its Lambda layer calls {', '.join(sorted(set(missing)))},"
                               " which no module the snapshot names defines (a notebook's or"
                               " the training script's): pass --model MODULE:FUNCTION")
    return model


def _custom_objects(snapshot: Snapshot, folder: Path, path: str, trust: bool) -> dict[str, Any]:
    """The user's classes the model.keras names, imported only for a trusted snapshot."""
    from gradcheck.targets.modules import load_attribute

    if not snapshot.custom_objects:
        return {}
    modules = sorted({spec.partition(":")[0] for spec in snapshot.custom_objects.values()})
    if not trust:
        raise _refusal(folder, f"its model uses the user's classes or functions"
                               f" {', '.join(sorted(snapshot.custom_objects))} (from"
                               f" {', '.join(modules)}): pass --trust to import them (for a"
                               " snapshot you made) or --model MODULE:FUNCTION")
    custom: dict[str, Any] = {}
    for name, spec in snapshot.custom_objects.items():
        module, _, qualname = spec.partition(":")
        if _unimportable(module, qualname):
            raise _refusal(folder, f"its model's {name} was defined {_where(module, qualname)}:"
                                   " pass --model MODULE:FUNCTION, a function that builds the"
                                   " model, from a module that does not train when imported")
        custom[name] = load_attribute(spec, path)
    return custom
