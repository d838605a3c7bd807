"""One training snapshot written and published before anything slow runs: its batch, its model
(`model.keras`, else the weights), the manifest; then its diagnosis stored beside it. Only the
snapshots this run wrote are pruned, the newest never."""

from __future__ import annotations

import inspect
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gradcheck.training import snapshot as format_
from gradcheck.training.snapshot import Snapshot, Trigger

if TYPE_CHECKING:
    from gradcheck.report import Report

LIBRARIES = ("keras", "tf_keras", "tensorflow", "builtins", "gradcheck")


@dataclass(frozen=True)
class Capture:
    """What a trigger caught: why, at which step and where in the epoch, the batch (fit's x, y,
    sample_weight, or a loss_fn's arguments: `structure` "xy" or "args"), how the loss was
    computed, and the recorded health arrays (health=True)."""

    trigger: Trigger
    step: int
    epoch: int | None
    batch_index: int | None
    batch: Sequence[Any]
    loss: dict[str, Any]
    structure: str
    health: dict[str, Any] | None = None


@dataclass(frozen=True)
class SnapshotWriter:
    """Snapshots of one run in `directory` (created at the first), at most `keep` of them
    kept; names never taken from another run's."""

    directory: Path
    keep: int
    log: Callable[[str], Any]
    run_id: str = field(default_factory=lambda: os.urandom(4).hex())
    written: list[Path] = field(default_factory=list)

    def write(self, model: Any, capture: Capture) -> Path:
        """Publish the snapshot of this capture; nothing is left behind when it fails."""
        from gradcheck.training.keras_snapshot import (
            batch_arrays,
            keras_package,
            versions,
            weight_arrays,
        )

        self.directory.mkdir(parents=True, exist_ok=True)
        self._clean_leftovers()
        package = keras_package(model)
        partial = format_.partial_directory(self.directory, capture.step, self.run_id)
        partial.mkdir()
        try:
            keys, arrays = batch_arrays(capture.batch, capture.structure)
            format_.save_arrays(partial / format_.BATCH_FILE, arrays)
            unsaved = _saved(model, partial / format_.MODEL_FILE)
            if unsaved:  # the weights alone, once, readable without Keras
                format_.save_arrays(partial / format_.WEIGHTS_FILE, weight_arrays(model))
            if capture.health:
                format_.save_arrays(partial / format_.HEALTH_FILE, capture.health)
            custom, modules = _user_objects(model, capture.loss)
            format_.write_manifest(partial, Snapshot(
                step=capture.step, epoch=capture.epoch, batch=capture.batch_index,
                trigger=capture.trigger, keras=package, loss=capture.loss, batch_keys=keys,
                batch_structure=capture.structure, modules=tuple(modules),
                custom_objects=custom, versions=versions(package),
                diagnosis={"model": unsaved} if unsaved else {}))
            final = format_.publish(partial, capture.step, self.run_id)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        self.written.append(final)
        self._prune()
        return final

    def existing(self) -> list[Path]:
        """This run's snapshots that are still there, oldest first."""
        return [path for path in self.written if (path / format_.MANIFEST).is_file()]

    def _prune(self) -> None:
        mine = self.existing()
        for old in mine[:-self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        self.written[:] = mine[-self.keep:]

    def _clean_leftovers(self) -> None:
        for left in format_.leftover_partials(self.directory, _alive):
            shutil.rmtree(left, ignore_errors=True)
            self.log(f"gradcheck.Watch: removed {left.name}, a snapshot left unfinished by a"
                     " process that was killed while writing it")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def loss_record(loss_fn: Callable[..., Any] | None) -> dict[str, Any]:
    """How the step computed its loss, as a snapshot records it: the model's compiled loss, or
    a function by module and qualified name (no file path: a snapshot is shared)."""
    if loss_fn is None:
        return {"kind": "compiled"}
    module = getattr(loss_fn, "__module__", None) or ""
    return {"kind": "function", "module": module,
            "qualname": getattr(loss_fn, "__qualname__", type(loss_fn).__qualname__)}


def _user_module(obj: Any) -> str | None:
    module = getattr(obj, "__module__", None) or getattr(type(obj), "__module__", None)
    if not module or module.partition(".")[0] in LIBRARIES:
        return None
    return str(module)


def _saved(model: Any, path: Path) -> str | None:
    """Save the model as .keras; why not, when it cannot be (a subclassed model without
    get_config, a tf.Module)."""
    from gradcheck.training.keras_snapshot import save_model

    try:
        save_model(model, path)
    except Exception as exc:
        path.unlink(missing_ok=True)
        paragraph = " ".join(str(exc).strip().split("\n\n")[0].split())
        why = paragraph or (
            f"{type(model).__name__} has no get_config()" if isinstance(exc, NotImplementedError)
            else "no message")
        return f"{type(exc).__name__}: {why}"
    return None


def _user_objects(model: Any, loss: dict[str, Any]) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The user's own classes and functions in the model (custom layers, the model class, a
    layer's activation, its loss) by name, and the modules that define them."""
    objects: list[Any] = [type(model)]
    code_of: list[Any] = []  # functions a Lambda layer's saved code calls by their module
    for layer in getattr(model, "_flatten_layers", lambda: [])():
        objects.append(type(layer))
        if inspect.isfunction(getattr(layer, "activation", None)):
            objects.append(layer.activation)
        if inspect.isfunction(getattr(layer, "function", None)):
            code_of.append(layer.function)
    compiled_loss = getattr(model, "loss", None)
    if callable(compiled_loss):
        objects.append(compiled_loss if inspect.isfunction(compiled_loss)
                       else type(compiled_loss))
    custom: dict[str, str] = {}
    modules: list[dict[str, Any]] = []
    for obj in objects:
        module = _user_module(obj)
        if module is None:
            continue
        custom[obj.__name__] = f"{module}:{obj.__qualname__}"
        if {"module": module} not in modules:
            modules.append({"module": module})
    for module in [*map(_user_module, code_of), loss.get("module")]:
        if module and {"module": module} not in modules:
            modules.append({"module": module})
    return custom, modules


def report_files(report: Report | None, error: str | None,
                 health: Mapping[str, Any] | None) -> dict[str, bytes]:
    """What a snapshot stores of its diagnosis: report.json and report.txt (as `gradcheck
    replay --format json` and its table show them, or the error that stopped it) and, with
    recorded health, health.png."""
    from gradcheck.render.health_plot import plot_health
    from gradcheck.render.json_format import render_error_json, render_json
    from gradcheck.render.text import render_text

    if report is not None:
        files = {format_.REPORT_JSON: render_json(report) + "\n",
                 format_.REPORT_TEXT: render_text(report)}
    else:
        files = {format_.REPORT_JSON: render_error_json(error or "", 2) + "\n",
                 format_.REPORT_TEXT: f"Error: {error}\n"}
    found = {name: text.encode() for name, text in files.items()}
    if health is not None:
        png = plot_health([str(n) for n in health["names"].tolist()], health["steps"],
                          health["norms"], int(health["failing_step"]))
        if png is not None:
            found[format_.HEALTH_PLOT] = png
    return found


def step_finding(report: Report | None, error: str | None, trigger: str) -> str:
    """The diagnosis in a line: the first failing finding, where, and its message; never "all
    is well" for a step that triggered."""
    if report is None:
        return error or "not diagnosed"
    for status in ("fail", "warn"):
        for check in report.sorted_checks():
            if check.status == status:
                where = f" at {check.location}" if check.location else ""
                message = check.message.split("\n")[0]
                return f"{status.upper()} {check.check}{where}: {message}"
    if trigger.startswith("non-finite"):
        return ("recomputed eagerly at the same weights and batch, the loss and its gradients"
                " are finite: the non-finite value comes from what the training step does not"
                " repeat here (a random draw such as dropout's mask, the compiled step's XLA or"
                " float16 kernels); train with jit_compile=False, or the same seed, to pin it")
    return "the diagnosis found no cause at the step's batch and weights"
