"""`gradcheck replay`: a snapshot's step rebuilt only from code the user names (--model,
--loss, --path; the modules the snapshot names only with --trust) and checked as Watch checked
it live."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gradcheck.check_settings import DEFAULT_RUN, CheckSettings
from gradcheck.training.step import XY, check_step

if TYPE_CHECKING:
    from gradcheck.options import CheckOptions
    from gradcheck.report import Report
    from gradcheck.training.snapshot import Snapshot


@dataclass(frozen=True)
class Replay:
    """A snapshot to replay and the code the user names to rebuild its step: `model` and `loss`
    (MODULE:FUNCTION, imported from `path`), or `trust` in what the snapshot names."""

    snapshot: str
    path: str = "."
    trust: bool = False
    model: str | None = None
    loss: str | None = None



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
