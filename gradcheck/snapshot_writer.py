"""One training snapshot written: its arrays and model, the manifest, and the diagnosis by a
fresh `gradcheck replay` process; renamed into place only once complete, the newest kept."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradcheck.load import snapshot as format_
from gradcheck.load.snapshot import Snapshot, Trigger


@dataclass(frozen=True)
class Capture:
    """What a trigger caught: why, at which step and where in the epoch, the batch (fit's x, y,
    sample_weight, or a loss_fn's arguments: `structure` "xy" or "args"), how the loss is
    rebuilt, and the recorded health arrays (health=True)."""

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
    """Where and how snapshots are written: at most `keep`, each diagnosed (unless `diagnose`
    is False) within `timeout` seconds; what happens is told to `log`."""

    directory: Path
    keep: int
    diagnose: bool
    timeout: float
    log: Callable[[str], Any]

    def write(self, model: Any, capture: Capture) -> Path:
        """DIRECTORY/step-NNNNNN for this capture; nothing is left behind when it fails."""
        from gradcheck.tf.keras_snapshot import keras_package, versions, weight_arrays

        package = keras_package(model)
        final = self.directory / format_.step_directory_name(capture.step)
        partial = self.directory / f".{final.name}.partial-{os.getpid()}"
        partial.mkdir()
        try:
            keys, arrays = _batch_arrays(capture.batch, capture.structure)
            format_.save_arrays(partial / format_.BATCH_FILE, arrays)
            format_.save_arrays(partial / format_.WEIGHTS_FILE, weight_arrays(model))
            if capture.health:
                format_.save_arrays(partial / format_.HEALTH_FILE, capture.health)
            unsaved = _saved(model, partial / format_.MODEL_FILE)
            if unsaved:
                self.log(f"gradcheck.Watch: warning: the model could not be saved as .keras"
                         f" ({unsaved}); the snapshot keeps its weights and batch, undiagnosed")
            custom, modules = _user_objects(model, capture.loss)
            snap = format_.write_manifest(partial, Snapshot(
                step=capture.step, epoch=capture.epoch, batch=capture.batch_index,
                trigger=capture.trigger, keras=package, loss=capture.loss, batch_keys=keys,
                batch_structure=capture.structure, modules=tuple(modules),
                custom_objects=custom, versions=versions(package),
                diagnosis={"model": unsaved} if unsaved else {}))
            bad_data = _non_finite_data(arrays)
            if bad_data:
                self.log(f"gradcheck.Watch: {bad_data}")
                format_.write_report_files(partial, json.dumps(
                    {"ok": False, "exit_code": 2, "error": bad_data}) + "\n", bad_data + "\n")
            elif self.diagnose and not unsaved:
                self._diagnose(partial, snap)
            format_.publish(partial, final)
        except BaseException:
            import shutil

            shutil.rmtree(partial, ignore_errors=True)
            raise
        format_.prune(self.directory, self.keep)
        return final

    def _diagnose(self, directory: Path, snap: Snapshot) -> None:
        """`gradcheck replay DIR --write-reports` in a fresh process, bounded by `timeout`."""
        self.log(f"gradcheck.Watch: diagnosing step {snap.step} in a worker process...")
        started = time.monotonic()
        command = [sys.executable, "-m", "gradcheck", "replay", str(directory), "-q",
                   "--write-reports"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=self.timeout,
                                  start_new_session=True, cwd=os.getcwd())
        except subprocess.TimeoutExpired:
            self.log(f"gradcheck.Watch: warning: the diagnosis of step {snap.step} did not finish"
                     f" in {self.timeout:g}s; run `gradcheck replay {directory.name}` later")
            return
        if not (directory / format_.REPORT_JSON).is_file():
            error = (done.stderr.strip().splitlines() or ["no output"])[-1]
            self.log(f"gradcheck.Watch: warning: the diagnosis of step {snap.step} failed"
                     f" (exit {done.returncode}): {error}")
            return
        self.log(f"gradcheck.Watch: diagnosis done in {time.monotonic() - started:.1f}s")



def module_of(obj: Any) -> dict[str, Any] | None:
    """How replay imports the user's module that defines obj: by name, or by file for a script
    run as __main__ (imported under its file's name, so its `if __name__ == "__main__"` block
    does not run)."""
    module = getattr(obj, "__module__", None) or getattr(type(obj), "__module__", None)
    if not module or module.partition(".")[0] in ("keras", "tf_keras", "tensorflow",
                                                  "builtins", "gradcheck"):
        return None
    source = sys.modules.get(module)
    file = getattr(source, "__file__", None)
    return {"module": module, "file": os.path.abspath(file) if file else None}


def _saved(model: Any, path: Path) -> str | None:
    """Save the model as .keras; why not, when it cannot be (a subclassed model without
    get_config)."""
    from gradcheck.tf.keras_snapshot import save_model

    try:
        save_model(model, path)
    except Exception as exc:
        path.unlink(missing_ok=True)
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def _batch_arrays(batch: Sequence[Any], structure: str) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The batch's names (x, y, sample_weight for fit; arg0, arg1... for a loss_fn's) and its
    arrays by key (a dict of named inputs as x/name)."""
    import numpy as np

    from gradcheck.tf.arrays import as_array

    names = ("x", "y", "sample_weight") if structure == "xy" else tuple(
        f"arg{i}" for i in range(len(batch)))
    def arrays(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: arrays(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)) and value and not np.isscalar(value[0]):
            return type(value)(arrays(item) for item in value)
        return as_array(value)

    named = {name: arrays(value) for name, value in zip(names, batch) if value is not None}
    return tuple(named), format_.flatten_batch(named)


def _user_objects(model: Any, loss: dict[str, Any]) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The user's own classes and functions in the model (custom layers, the model class, a
    layer's activation, its loss) by name, and the modules that define them."""
    objects: list[Any] = [type(model)]
    for layer in getattr(model, "_flatten_layers", lambda: [])():
        objects.append(type(layer))
        if inspect.isfunction(getattr(layer, "activation", None)):
            objects.append(layer.activation)
    compiled_loss = getattr(model, "loss", None)
    if callable(compiled_loss):
        objects.append(compiled_loss if inspect.isfunction(compiled_loss)
                       else type(compiled_loss))
    custom: dict[str, str] = {}
    modules: list[dict[str, Any]] = []
    for obj in objects:
        module = module_of(obj)
        if module is None:
            continue
        custom[obj.__name__] = f"{module['module']}:{obj.__qualname__}"
        if module not in modules:
            modules.append(module)
    if loss.get("module") and {"module": loss["module"], "file": loss.get("file")} not in modules:
        modules.append({"module": loss["module"], "file": loss.get("file")})
    return custom, modules


def _non_finite_data(arrays: dict[str, Any]) -> str | None:
    """The batch itself holding NaN or inf: then the data, not a gradient, is at fault."""
    import numpy as np

    for name, array in arrays.items():
        if np.issubdtype(array.dtype, np.floating) or array.dtype.name == "bfloat16":
            bad = ~np.isfinite(array.astype(np.float64))
            if bad.any():
                where = [int(i) for i in np.argwhere(bad)[0]]
                return (f"the batch's {name} is not finite in {int(bad.sum())} element(s)"
                        f" (first {array.astype(np.float64)[tuple(where)]} at {where}): the data,"
                        " not a gradient, is at fault; clean the input pipeline (drop or impute"
                        " the row; tf.debugging.check_numerics on the dataset finds them all)")
    return None


def finding(path: Path) -> str:
    """The diagnosis in a few words: the first failing finding, its location and message."""
    try:
        data = json.loads((path / format_.REPORT_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "not diagnosed (run `gradcheck replay` on it)"
    if data.get("error"):
        return str(data["error"]).split(":")[0]
    for status in ("fail", "warn"):
        for check in data.get("checks", []):
            if check.get("status") == status:
                where = f" at {check['location']}" if check.get("location") else ""
                message = (check.get("message") or "").split("\n")[0]
                return f"{status.upper()} {check['check']}{where}: {message}"
    return "the diagnosis found nothing wrong at this step"
