"""`gradcheck replay`: a snapshot's step rebuilt only from code the user names (--model,
--loss, --path; the modules the snapshot names only with --trust) and checked as Watch checked
it live. What is missing is one refusal that names every option the replay needs."""

from __future__ import annotations

import inspect
import json
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gradcheck.check_settings import DEFAULT_RUN, CheckSettings
from gradcheck.errors import LoadError
from gradcheck.training.step import XY, check_step

if TYPE_CHECKING:
    from gradcheck.options import CheckOptions
    from gradcheck.report import Report
    from gradcheck.training.snapshot import Snapshot

# The only modules a model.keras may name before the user trusts the snapshot: Keras' own.
KERAS_MODULES = ("keras", "tf_keras", "builtins")
MAX_CONFIG_BYTES = 64 << 20
# The first parameter of a loss as Keras calls a compiled one: loss(y_true, y_pred).
LABEL_NAMES = ("y_true", "y", "labels", "label", "target", "targets", "true")


@dataclass(frozen=True)
class Replay:
    """A snapshot to replay and the code the user names to rebuild its step: `model` and `loss`
    (MODULE:FUNCTION, imported from `path`), or `trust` in what the snapshot names."""

    snapshot: str
    path: str = "."
    trust: bool = False
    model: str | None = None
    loss: str | None = None


@dataclass(frozen=True)
class _Need:
    """What replay lacks to rebuild the step: why, the option that gives it, and whether
    --trust would give it too."""

    why: str
    option: str
    trusted: bool = False


@dataclass(frozen=True)
class _Loss:
    """The loss the user gave: `step` (loss(model, *batch)) or Keras' compiled form
    (loss(y_true, y_pred))."""

    function: Callable[..., Any]
    step: bool


def check_snapshot(replay: Replay, options: CheckOptions,
                   settings: CheckSettings = DEFAULT_RUN) -> Report:
    """A snapshot's step checked as Watch checked it live: the model from the user's factory,
    else its model.keras in Keras' safe mode (with the user's classes and its Lambda layers only
    when trusted); the loss from the user's function (either form), the compiled loss, or (when
    trusted) the function the snapshot names. No file of the snapshot names code that runs."""
    from gradcheck.training.snapshot import (
        BATCH_FILE,
        HEALTH_FILE,
        load_arrays,
        read_snapshot,
        unflatten_batch,
    )

    snapshot = read_snapshot(replay.snapshot)
    folder = Path(replay.snapshot)
    batch = unflatten_batch(snapshot.batch_keys, load_arrays(folder / BATCH_FILE))
    if snapshot.batch_structure == "xy":
        named = dict(zip(snapshot.batch_keys, batch))
        batch = [named.get(name) for name in XY]
    config = _model_config(snapshot, folder)
    given = _given_loss(replay, snapshot, batch)
    needs = [*_loss_needs(snapshot, replay, given, config),
             *_model_needs(snapshot, replay, given, config)]
    if needs:
        raise _refused(folder, needs)
    loss_fn = _step_loss(snapshot, replay, given)
    model = _model(snapshot, folder, replay, given, config, batch)
    if given is not None and not given.step:
        loss_fn = _compiled_as(model, given.function, snapshot)
    if loss_fn is None:
        _require_compiled(model, snapshot, folder, replay, config)
    health = load_arrays(folder / HEALTH_FILE) if HEALTH_FILE in snapshot.files else None
    label = f"{replay.snapshot} (step {snapshot.step}: {snapshot.trigger.message})"
    return check_step(model, loss_fn, batch, snapshot.batch_structure, options, label, health,
                      settings, without_gradient=snapshot.trigger.weights)


def _refused(folder: Path, needs: Sequence[_Need]) -> LoadError:
    """One line: every reason, then the options that together make the replay work."""
    options = " and ".join(dict.fromkeys(need.option for need in needs))
    if all(need.trusted for need in needs):
        if "MODULE:FUNCTION" in options:
            advice = f"pass --trust (for a snapshot you made) or {options}"
        else:
            advice = f"pass {options} (or --trust, for a snapshot you made)"
    else:
        advice = f"pass {options}"
    return _refusal(folder, "; ".join(need.why for need in needs) + f": {advice}")


def _refusal(folder: Path, what: str) -> LoadError:
    from gradcheck.training.snapshot import REPORT_TEXT

    report = folder / REPORT_TEXT
    made = f"; the diagnosis made in training is in {report}" if report.is_file() else ""
    return LoadError(f"snapshot {folder}: {what}{made}")


def _imported(spec: str, path: str, flag: str) -> Any:
    """`module:attr` imported from --path; a module not found there names --path."""
    from gradcheck.targets.modules import load_attribute

    try:
        return load_attribute(spec, path)
    except LoadError as exc:
        module = spec.partition(":")[0]
        if exc.message.startswith(f"could not import module {module!r}: no module named"):
            raise LoadError(f"{flag} {spec}: no module {module!r} in --path {path!r}: pass"
                            " --path DIR, the folder that holds"
                            f" {module.replace('.', '/')}.py") from None
        raise LoadError(f"{flag} {spec}: {exc.message}", user_traceback=exc.user_traceback
                        ) from None


def _given_loss(replay: Replay, snapshot: Snapshot, batch: Sequence[Any]) -> _Loss | None:
    if replay.loss is None:
        return None
    function = _imported(replay.loss, replay.path, "--loss")
    if inspect.isclass(function):
        raise LoadError(f"--loss {replay.loss} is a class: name a function, or an instance of"
                        " the loss")
    if not callable(function):
        raise LoadError(f"--loss {replay.loss} is not callable")
    given = [value for value in batch]
    while given and given[-1] is None:
        given.pop()
    step = _step_form(function, len(given))
    if not step and len(given) < 2:
        raise LoadError(f"--loss {replay.loss} takes (y_true, y_pred), as Keras calls a compiled"
                        " loss, but the snapshot's step has no labels: give the loss as the"
                        f" step computes it, loss(model, {', '.join(_names(snapshot))})")
    return _Loss(function, step)


def _names(snapshot: Snapshot) -> list[str]:
    return list(snapshot.batch_keys)


def _step_form(function: Callable[..., Any], batch_size: int) -> bool:
    """Whether `function` is loss(model, *batch) rather than loss(y_true, y_pred): by its first
    parameter's name, else by the number of arguments it takes."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return True
    parameters = list(signature.parameters.values())
    first = parameters[0].name if parameters else ""
    if first == "model":
        return True
    if first in LABEL_NAMES:
        return False
    return _binds(signature, 1 + batch_size) or not _binds(signature, 2)


def _binds(signature: inspect.Signature, count: int) -> bool:
    try:
        signature.bind(*range(count))
    except TypeError:
        return False
    return True


def _loss_needs(snapshot: Snapshot, replay: Replay, given: _Loss | None,
                config: Mapping[str, Any] | None) -> Iterator[_Need]:
    """What the loss lacks: the function the snapshot names (its module only with --trust), or
    the compiled loss when it is the user's."""
    if given is not None:
        return
    loss = snapshot.loss
    if loss.get("kind") != "compiled":
        module, qualname = str(loss.get("module", "")), str(loss.get("qualname", ""))
        if _unimportable(module, qualname):
            yield _Need(f"its loss {qualname or '?'} was defined {_where(module, qualname)},"
                        " which replay never runs",
                        "--loss MODULE:FUNCTION (the same loss, loss(model, *batch), in a module"
                        " that does not train when imported)")
        elif not replay.trust:
            yield _Need(f"its loss is {module}:{qualname}, code replay runs only when you say so",
                        f"--loss {module}:{qualname}", trusted=True)
        return
    if replay.model is not None:
        return  # the model --model builds may be compiled with it
    name = _compiled_loss_name(config)
    spec = snapshot.custom_objects.get(name) if name is not None else None
    if config is None:  # no model.keras: the functions the snapshot names may hold the loss
        spec = _loss_candidate(snapshot)
        name = spec.partition(":")[2].rpartition(".")[2] if spec else None
    if name is None:
        return  # one of Keras' losses
    if spec is None:
        yield _Need(f"its compiled loss {name} is none of Keras' and the snapshot does not say"
                    " where it is defined",
                    "--loss MODULE:FUNCTION (loss(y_true, y_pred), as Keras calls it)")
        return
    module, _, qualname = spec.partition(":")
    if _unimportable(module, qualname):
        yield _Need(f"its compiled loss {name} was defined {_where(module, qualname)}, which"
                    " replay never runs",
                    f"--loss MODULE:{name.replace('<', '').replace('>', '')} ({name} copied into"
                    " a module that does not train when imported; loss(y_true, y_pred), as"
                    " Keras calls it)")
    elif not replay.trust:
        yield _Need(f"its compiled loss is {spec}, code replay runs only when you say so",
                    f"--loss {spec}", trusted=True)


def _model_needs(snapshot: Snapshot, replay: Replay, given: _Loss | None,
                 config: Mapping[str, Any] | None) -> Iterator[_Need]:
    """What the model lacks: a factory (--model) where the snapshot holds only weights, the
    user's classes (--trust), the code of Lambda layers (--trust)."""
    from gradcheck.training.snapshot import MODEL_FILE, WEIGHTS_FILE

    if replay.model is not None:
        return
    if MODEL_FILE not in snapshot.files:
        why = snapshot.diagnosis.get("model", "a subclassed model or a tf.Module")
        yield _Need(f"its model could not be saved as .keras in training ({why})",
                    "--model MODULE:FUNCTION, a function that builds it (its weights are in"
                    f" {WEIGHTS_FILE})")
        return
    assert config is not None
    loss_name = _compiled_loss_name(config)
    classes = {name: spec for name, spec in snapshot.custom_objects.items() if name != loss_name}
    for module, name in _foreign(config.get("config")):
        classes.setdefault(name, f"{module}:{name}")
    for name, spec in classes.items():
        module, _, qualname = spec.partition(":")
        if _unimportable(module, qualname):
            yield _Need(f"its model's {name} was defined {_where(module, qualname)}, which"
                        " replay never runs",
                        "--model MODULE:FUNCTION, a function that builds the model, from a"
                        " module that does not train when imported")
            return
    if not replay.trust and given is None and loss_name is None and snapshot.loss.get(
            "kind") == "compiled":
        for module, name in _foreign(config.get("compile_config")):
            classes.setdefault(name, f"{module}:{name}")
    if classes and not replay.trust:
        modules = sorted({spec.partition(":")[0] for spec in classes.values()})
        yield _Need(f"its model uses the user's classes or functions {', '.join(sorted(classes))}"
                    f" (from {', '.join(modules)}), code replay imports only when you say so",
                    "--model MODULE:FUNCTION", trusted=True)
    elif _has_lambda(config.get("config")) and not replay.trust:
        yield _Need("its model has a Lambda layer, whose code Keras' safe mode does not load",
                    "--model MODULE:FUNCTION", trusted=True)


def _step_loss(snapshot: Snapshot, replay: Replay, given: _Loss | None
               ) -> Callable[..., Any] | None:
    """loss(model, *batch): the user's, or (trusted) the one the snapshot names; None for the
    compiled loss."""
    if given is not None:
        return given.function if given.step else None
    loss = snapshot.loss
    if loss.get("kind") == "compiled":
        return None
    function: Callable[..., Any] = _imported(f"{loss['module']}:{loss['qualname']}", replay.path,
                                             "--trust")
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


def _model_config(snapshot: Snapshot, folder: Path) -> dict[str, Any] | None:
    """model.keras's config.json, read as data (no Keras): what classes and modules it names."""
    from gradcheck.training.snapshot import MODEL_FILE

    if MODEL_FILE not in snapshot.files:
        return None
    try:
        with zipfile.ZipFile(folder / MODEL_FILE) as archive:
            info = archive.getinfo("config.json")
            if info.file_size > MAX_CONFIG_BYTES:
                raise ValueError(f"config.json is {info.file_size} bytes")
            config = json.loads(archive.read(info))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, RecursionError) as exc:
        raise _refusal(folder, f"its {MODEL_FILE} is not a Keras model file"
                               f" ({type(exc).__name__}: {exc})") from None
    if not isinstance(config, dict):
        raise _refusal(folder, f"its {MODEL_FILE} is not a Keras model file (its config is not"
                               " an object)")
    return config


def _objects(value: Any) -> Iterator[Mapping[str, Any]]:
    """Every serialised object in a Keras config (a dict with a class_name)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "class_name" in item:
                yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _foreign(value: Any) -> list[tuple[str, str]]:
    """(module, class) of every object a config names from outside Keras: Keras' loaders import
    such a module (tf-keras even in safe mode) before anything refuses it."""
    found = []
    for item in _objects(value):
        module = item.get("module")
        if module is None:
            continue
        if not isinstance(module, str) or module.partition(".")[0] not in KERAS_MODULES:
            found.append((str(module), str(item.get("class_name"))))
    return found


def _has_lambda(value: Any) -> bool:
    return any(item.get("class_name") == "Lambda" for item in _objects(value))


def _compiled_loss_name(config: Mapping[str, Any] | None) -> str | None:
    """The name of the user's compiled loss as model.keras records it (a function's name, a
    Loss subclass's); None for one of Keras' losses or none."""
    compiled = (config or {}).get("compile_config")
    loss = compiled.get("loss") if isinstance(compiled, dict) else None
    if not isinstance(loss, dict):
        return None
    module = loss.get("module")
    if loss.get("class_name") == "function" and isinstance(loss.get("config"), str) and (
            module == "builtins"):
        name: str = loss["config"]
        return None if _keras_has_loss(name) else name
    if isinstance(module, str) and module.partition(".")[0] not in KERAS_MODULES:
        return str(loss.get("class_name"))
    return None


def _keras_has_loss(name: str) -> bool:
    """Whether a function name is one of Keras' own losses (mse, categorical_crossentropy)."""
    import importlib

    try:
        return callable(getattr(importlib.import_module("keras.losses"), name, None))
    except ImportError:
        return False


def _model(snapshot: Snapshot, folder: Path, replay: Replay, given: _Loss | None,
           config: Mapping[str, Any] | None, batch: Sequence[Any]) -> Any:
    from gradcheck.training.keras_snapshot import (
        assign_weights,
        load_weights,
        rebind_lambdas,
    )
    from gradcheck.training.snapshot import MODEL_FILE, WEIGHTS_FILE, load_arrays

    if replay.model is not None:
        factory = _imported(replay.model, replay.path, "--model")
        if not callable(factory):
            raise LoadError(f"--model {replay.model} is not a function that builds the model")
        model = factory()
        if snapshot.batch_structure == "xy" and not getattr(model, "built", True):
            model(batch[0])  # a subclassed model builds its weights at its first call
        try:
            if WEIGHTS_FILE in snapshot.files:
                assign_weights(model, load_arrays(folder / WEIGHTS_FILE))
            else:
                load_weights(model, folder / MODEL_FILE)
        except (ValueError, KeyError) as exc:
            raise LoadError(f"snapshot {folder}: the model {replay.model} builds is not the one"
                            f" that trained ({exc})") from None
        return model
    from gradcheck.targets.modules import import_module

    loss_name = _compiled_loss_name(config)
    compiled = given is None and snapshot.loss.get("kind") == "compiled"
    custom = _custom_objects(snapshot, replay, skip=() if compiled else (loss_name,))
    if loss_name is not None and given is not None and not given.step:
        custom[loss_name] = given.function
        compiled = True
    modules = [import_module(entry["module"], replay.path) for entry in snapshot.modules
               if replay.trust and not _unimportable(entry["module"], "")]
    model = _load_model(snapshot, folder, custom, replay.trust, compiled)
    missing = rebind_lambdas(model, modules)
    if missing:
        raise _refusal(folder, f"its Lambda layer calls {', '.join(sorted(set(missing)))},"
                               " which no module the snapshot names defines (a notebook's or"
                               " the training script's): pass --model MODULE:FUNCTION")
    return model


def _load_model(snapshot: Snapshot, folder: Path, custom: dict[str, Any], trust: bool,
                compiled: bool) -> Any:
    """model.keras, compiled only when the step's loss is the compiled one."""
    import importlib
    import warnings

    from gradcheck.training.snapshot import MODEL_FILE

    keras = importlib.import_module("tf_keras" if snapshot.keras == "tf_keras" else "keras")
    try:
        with warnings.catch_warnings():  # Keras' own about the compiled state: not the user's
            warnings.simplefilter("ignore")
            return keras.models.load_model(str(folder / MODEL_FILE), custom_objects=custom,
                                           safe_mode=not trust, compile=compiled)
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        if "safe_mode" in str(exc) or "lambda" in str(exc).lower():
            raise _refusal(folder, "its model has a Lambda layer, whose code Keras' safe mode"
                                   " does not load: pass --trust (for a snapshot you made) or"
                                   " --model MODULE:FUNCTION") from None
        raise _refusal(folder, f"its model could not be reloaded ({type(exc).__name__}:"
                               f" {first}); pass --model MODULE:FUNCTION, a function that"
                               " builds it") from None


def _custom_objects(snapshot: Snapshot, replay: Replay, skip: Sequence[str | None] = ()
                    ) -> dict[str, Any]:
    """The user's classes and functions the model.keras names, imported only when trusted."""
    if not replay.trust:
        return {}
    custom: dict[str, Any] = {}
    for name, spec in snapshot.custom_objects.items():
        module, _, qualname = spec.partition(":")
        if name in skip or _unimportable(module, qualname):
            continue  # not needed, or refused before
        custom[name] = _imported(spec, replay.path, "--trust")
    return custom


def _compiled_as(model: Any, function: Callable[..., Any], snapshot: Snapshot
                 ) -> Callable[..., Any] | None:
    """A loss(y_true, y_pred) as fit calls a compiled loss: the model compiled with it (its own
    optimizer kept), else, for a model Keras does not compile (a tf.Module), its batch mean."""
    if getattr(model, "loss", None) is function:
        return None
    if callable(getattr(model, "compile", None)) and callable(
            getattr(model, "compute_loss", None)):
        optimizer = getattr(model, "optimizer", None) or "sgd"
        model.compile(optimizer=optimizer, loss=function)
        return None
    from gradcheck.engine.runtime import tensorflow

    def loss(model: Any, x: Any, y: Any, sample_weight: Any = None) -> Any:
        tf = tensorflow()
        values = function(y, model(x, training=True))
        if sample_weight is not None:
            values = values * tf.cast(sample_weight, values.dtype)
        return tf.reduce_mean(values)

    loss.__name__ = loss.__qualname__ = getattr(function, "__name__", "loss")
    return loss


def _loss_candidate(snapshot: Snapshot) -> str | None:
    """Where no model.keras records the compiled loss: the one function among the user's objects
    the snapshot names (classes are the model's and its layers')."""
    functions = [spec for spec in snapshot.custom_objects.values()
                 if spec.partition(":")[2].rpartition(".")[2][:1].islower()]
    return functions[0] if len(functions) == 1 else None


def _require_compiled(model: Any, snapshot: Snapshot, folder: Path, replay: Replay,
                      config: Mapping[str, Any] | None) -> None:
    """The step used the compiled loss: a model --model builds uncompiled is compiled with the
    snapshot's loss where that is Keras' own (or, trusted, the user's it names); else the
    refusal names the loss to pass."""
    from gradcheck.training.keras_snapshot import compiled_loss, own_train_step

    if compiled_loss(model) or own_train_step(model):
        return
    compile_config = (config or {}).get("compile_config")
    recorded = compile_config.get("loss") if isinstance(compile_config, dict) else None
    name = _compiled_loss_name(config)
    spec = snapshot.custom_objects.get(name) if name is not None else None
    if config is None:  # no model.keras: the functions the snapshot names may hold the loss
        spec = _loss_candidate(snapshot)
    loss: Any = None
    if recorded is not None and name is None and not _foreign(recorded):
        import importlib

        keras = importlib.import_module("tf_keras" if snapshot.keras == "tf_keras" else "keras")
        loss = keras.losses.get(recorded)
    elif spec is not None and replay.trust and not _unimportable(*spec.partition(":")[::2]):
        loss = _imported(spec, replay.path, "--trust")
    if loss is not None and callable(getattr(model, "compile", None)):
        model.compile(optimizer=getattr(model, "optimizer", None) or "sgd", loss=loss)
        return
    if spec is not None and not _unimportable(*spec.partition(":")[::2]):
        option = f"--loss {spec}"
    else:
        option = "--loss MODULE:FUNCTION, the loss it was compiled with as Keras calls it,"
        option += f" loss(y_true, y_pred){f' ({name})' if name else ''}"
    raise _refusal(folder, f"the model {replay.model} builds is not compiled, and the step used"
                           f" the loss it was compiled with: pass {option} as well")
