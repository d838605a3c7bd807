"""The on-disk form of a training snapshot (gradcheck.Watch writes it, `gradcheck replay` reads
it): `snapshot.json` and its arrays, checksummed, written under a temporary name and published
under a name no other run holds; a snapshot names no code to run and no path of its machine."""

from __future__ import annotations

import hashlib
import json
import os
import re
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gradcheck.atomic import create_file, replace_file
from gradcheck.errors import LoadError

FORMAT = 2
READABLE_FORMATS = (1, 2)  # format 1 also recorded absolute paths, which are now ignored
MANIFEST = "snapshot.json"
MODEL_FILE = "model.keras"
BATCH_FILE = "batch.npz"
WEIGHTS_FILE = "weights.npz"
HEALTH_FILE = "health.npz"  # per-weight gradient norms of the last steps (health=True)
HEALTH_PLOT = "health.png"
DATA_FILES = (MODEL_FILE, BATCH_FILE, WEIGHTS_FILE, HEALTH_FILE)
REPORT_JSON, REPORT_TEXT = "report.json", "report.txt"
MAX_MANIFEST_BYTES = 1 << 20
LISTED_SNAPSHOTS = 5  # a folder of snapshots given to replay: the newest it names
KERAS_PACKAGES = ("keras", "tf_keras")  # the only packages a snapshot's model is loaded with
# step-000345, or step-000345-<run id> when another run already holds that step's name.
_STEP_NAME = re.compile(r"^step-(\d{6,})(?:-[0-9a-f]{8}(?:-\d+)?)?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_PARTIAL_NAME = re.compile(r"^\.step-\d{6,}\.partial-(\d+)-[0-9a-f]{8}$")


def step_directory_name(step: int) -> str:
    """step-000345: the 0-based optimizer step, six digits at least."""
    return f"step-{step:06d}"


@dataclass(frozen=True)
class Trigger:
    """Why the snapshot was taken: kind (non-finite-loss, non-finite-gradient, no-gradient,
    loss-scale), what the training process saw, and the weights it concerns."""

    kind: str
    message: str
    weights: tuple[str, ...] = ()


@dataclass(frozen=True)
class Snapshot:
    """What `snapshot.json` says: where training stood, why, and how to rebuild the loss."""

    step: int
    epoch: int | None
    batch: int | None
    trigger: Trigger
    keras: str  # the package that trained: "keras" (Keras 3) or "tf_keras"
    # How the loss was computed: {"kind": "compiled"} (the model's compiled loss) or
    # {"kind": "function", "module": ..., "qualname": ...} (loss_fn(model, *batch)); a record,
    # which replay imports only when the user says so (--trust).
    loss: Mapping[str, Any]
    batch_keys: tuple[str, ...]  # the batch's arrays in order: x, y, sample_weight or x0, x1...
    batch_structure: str  # "xy": (x, y[, sample_weight]) for fit; "args": loss_fn's arguments
    # Modules of the user's own classes and functions the model and loss need, each as
    # {"module": name}: imported on replay only with --trust (never read from the snapshot).
    modules: tuple[Mapping[str, Any], ...] = ()
    custom_objects: Mapping[str, str] = field(default_factory=dict)  # name -> module:qualname
    versions: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)  # file -> sha256
    diagnosis: Mapping[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "step": self.step, "epoch": self.epoch, "batch": self.batch,
            "trigger": {"kind": self.trigger.kind, "message": self.trigger.message,
                        "weights": list(self.trigger.weights)},
            "keras": self.keras, "loss": dict(self.loss), "batch_keys": list(self.batch_keys),
            "batch_structure": self.batch_structure,
            "modules": [dict(m) for m in self.modules],
            "custom_objects": dict(self.custom_objects), "versions": dict(self.versions),
            "files": dict(self.files), "diagnosis": dict(self.diagnosis),
        }


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def save_arrays(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Arrays only (no object arrays: a snapshot is loaded with allow_pickle=False)."""
    plain = {key: np.asarray(value) for key, value in arrays.items()}
    for key, value in plain.items():
        if value.dtype == object:
            raise ValueError(f"{key} is not an array of numbers")
    with open(path, "wb") as stream:
        np.savez(stream, **plain)


def flatten_batch(named: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """A batch's arrays by key: `x` for an array, `x/name` for a dict's entries (a model with
    named inputs), `x/0`, `x/1` for a list's or tuple's, nested as deep as the batch is
    (`x/0/name`)."""
    flat: dict[str, np.ndarray] = {}
    for name, value in named.items():
        _flatten_into(flat, name, value)
    return flat


def _flatten_into(flat: dict[str, np.ndarray], key: str, value: Any) -> None:
    if isinstance(value, Mapping):
        for name, item in value.items():
            if "/" in str(name):
                raise ValueError(f"the batch's {key} has a key with a '/': {name!r}")
            _flatten_into(flat, f"{key}/{name}", item)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _flatten_into(flat, f"{key}/{index}", item)
    else:
        flat[key] = np.asarray(value)


def unflatten_batch(names: tuple[str, ...], arrays: Mapping[str, np.ndarray]) -> list[Any]:
    """flatten_batch undone, in the order of `names` (sequences come back as lists); a
    LoadError when the arrays miss one of the names."""
    for name in names:
        if name not in arrays and not any(key.startswith(name + "/") for key in arrays):
            raise LoadError(f"the snapshot's batch has no array for {name!r}")
    return [_unflatten(name, arrays) for name in names]


def _unflatten(key: str, arrays: Mapping[str, np.ndarray]) -> Any:
    if key in arrays:
        return arrays[key]
    prefix = key + "/"
    parts = dict.fromkeys(k[len(prefix):].partition("/")[0] for k in arrays
                          if k.startswith(prefix))
    if parts and all(part.isdigit() for part in parts):
        return [_unflatten(f"{prefix}{i}", arrays) for i in range(len(parts))]
    return {part: _unflatten(prefix + part, arrays) for part in parts}


def non_finite_data(arrays: Mapping[str, np.ndarray]) -> str | None:
    """The batch itself holding NaN or inf (flattened as flatten_batch does): then the data,
    not a gradient, is at fault."""
    for name, array in arrays.items():
        if np.issubdtype(array.dtype, np.floating) or array.dtype.name == "bfloat16":
            values = array.astype(np.float64)
            bad = ~np.isfinite(values)
            if bad.any():
                whole = _whole_columns(values)
                if whole:
                    return (f"the batch's {name} is NaN in every sample of feature(s)"
                            f" {', '.join(map(str, whole))}: a feature standardised by a zero"
                            " standard deviation (a constant column, (x - mean) / std = 0 / 0);"
                            " divide by max(std, eps) or drop the constant feature in the input"
                            " pipeline")
                where = [int(i) for i in np.argwhere(bad)[0]]
                return (f"the batch's {name} is not finite in {int(bad.sum())} element(s)"
                        f" (first {values[tuple(where)]} at {where}): the data, not a"
                        " gradient, is at fault; clean the input pipeline (drop or impute the"
                        " row; tf.debugging.check_numerics on the dataset finds them all)")
    return None


def _whole_columns(values: np.ndarray) -> list[int]:
    """The features (last axis) that are NaN in every sample, when some are finite."""
    if values.ndim < 2 or values.shape[0] < 2:
        return []
    flat = values.reshape(-1, values.shape[-1])
    nan = np.isnan(flat).all(axis=0)
    return [int(k) for k in np.flatnonzero(nan)] if np.isfinite(flat).any() else []


def load_arrays(path: Path) -> dict[str, np.ndarray]:
    """A snapshot's .npz, numbers only (no pickle), each array's header checked against the
    bytes the file holds before anything is allocated; a LoadError (exit 2) for a damaged one."""
    try:
        with zipfile.ZipFile(path) as archive:
            for member in archive.infolist():
                with archive.open(member) as stream:
                    _check_header(stream, member.file_size)
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, MemoryError) as exc:
        raise LoadError(f"{path} is damaged or not a snapshot's array file"
                        f" ({type(exc).__name__}: {exc})") from None


def _check_header(stream: Any, size: int) -> None:
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
    else:
        shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
    if dtype.hasobject:
        raise ValueError("it holds an object array")
    if int(np.prod(shape, dtype=np.float64)) * dtype.itemsize > size:
        raise ValueError(f"an array header declares {shape} of {dtype}, more than the"
                         f" {size} bytes stored")


def write_manifest(directory: Path, snapshot: Snapshot) -> Snapshot:
    """Checksum the files present and write snapshot.json (the last file of a snapshot's data)."""
    files = {name: _sha256(directory / name) for name in DATA_FILES
             if (directory / name).is_file()}
    snapshot = Snapshot(**{**snapshot.__dict__, "files": files})
    replace_file(directory / MANIFEST, (json.dumps(snapshot.as_json(), indent=2) + "\n").encode())
    return snapshot


def write_report_files(directory: Path, files: Mapping[str, bytes]) -> None:
    """A snapshot's reports (report.json, report.txt, health.png), each created anew: never
    through a symlink, never over a file that is already there (a LoadError names it)."""
    for name in files:
        if os.path.lexists(directory / name):
            raise LoadError(f"{directory / name} already exists: gradcheck writes a snapshot's"
                            " report only where there is none (remove it, or use -o)")
    for name, data in files.items():
        try:
            create_file(directory / name, data)
        except FileExistsError:
            raise LoadError(f"{directory / name} appeared while it was written; left as it is"
                            ) from None


def partial_directory(directory: Path, step: int, run_id: str) -> Path:
    """Where a snapshot is written before it is published (named by this process)."""
    return directory / f".{step_directory_name(step)}.partial-{os.getpid()}-{run_id}"


def publish(partial: Path, step: int, run_id: str) -> Path:
    """Move a complete snapshot to a name no other snapshot holds: step-NNNNNN, else
    step-NNNNNN-<run id>(-n). The name is claimed by mkdir (atomic) and the manifest moved
    last, so that a reader sees the snapshot complete or not at all."""
    base = step_directory_name(step)
    names = [base, f"{base}-{run_id}", *(f"{base}-{run_id}-{n}" for n in range(2, 1000))]
    for name in names:
        final = partial.parent / name
        try:
            final.mkdir()
        except FileExistsError:
            continue
        for item in sorted(partial.iterdir(), key=lambda p: p.name == MANIFEST):
            os.replace(item, final / item.name)
        partial.rmdir()
        return final
    raise LoadError(f"no free name for step {step}'s snapshot in {partial.parent}")


def leftover_partials(directory: Path, alive: Callable[[int], bool]) -> list[Path]:
    """Temporary snapshot folders whose writing process is gone (killed while it wrote)."""
    if not directory.is_dir():
        return []
    return [p for p in directory.iterdir()
            if (m := _PARTIAL_NAME.match(p.name)) and not alive(int(m.group(1)))]


def snapshots_in(directory: Path) -> list[Path]:
    """The published snapshots directly in `directory` (Watch's DIRECTORY), newest first."""
    found = []
    try:
        for entry in directory.iterdir():
            manifest = entry / MANIFEST
            if _STEP_NAME.match(entry.name) and manifest.is_file() and not entry.is_symlink():
                found.append((manifest.stat().st_mtime, entry.name, entry))
    except OSError:
        return []
    return [entry for _, _, entry in sorted(found, reverse=True)]


def read_snapshot(directory: str | Path) -> Snapshot:
    """snapshot.json of a complete, unaltered snapshot; a LoadError (exit 2) in one line for a
    missing, partial, altered or malformed one."""
    path = Path(directory)
    if not path.exists():
        raise LoadError(f"snapshot {directory} does not exist")
    if not path.is_dir():
        raise LoadError(f"snapshot {directory} is not a directory (gradcheck.Watch writes"
                        " DIRECTORY/step-NNNNNN directories)")
    manifest = path / MANIFEST
    if not manifest.is_file():
        inside = snapshots_in(path)
        if inside:
            listed = ", ".join(str(p) for p in inside[:LISTED_SNAPSHOTS]) + (
                f" and {len(inside) - LISTED_SNAPSHOTS} more"
                if len(inside) > LISTED_SNAPSHOTS else "")
            raise LoadError(f"{directory} holds snapshots, it is not one: replay one of them,"
                            f" e.g. gradcheck replay {inside[0]} (newest first: {listed})")
        raise LoadError(f"snapshot {directory} is partial or not a snapshot: it has no {MANIFEST}")
    try:
        if manifest.stat().st_size > MAX_MANIFEST_BYTES:
            raise ValueError(f"{manifest.stat().st_size} bytes")
        snapshot = _from_json(json.loads(manifest.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise LoadError(f"snapshot {directory}: {MANIFEST} is not a gradcheck snapshot"
                        f" manifest ({type(exc).__name__}: {exc})") from None
    if BATCH_FILE not in snapshot.files:
        raise LoadError(f"snapshot {directory} is partial: its manifest lists no {BATCH_FILE}")
    for name, digest in snapshot.files.items():
        if name not in DATA_FILES:
            raise LoadError(f"snapshot {directory}: its manifest lists {name!r}, not a"
                            " snapshot's file")
        file = path / name
        if file.is_symlink() or not file.is_file():
            raise LoadError(f"snapshot {directory} is partial: {name} is missing"
                            + (" (a symlink)" if file.is_symlink() else ""))
        if _sha256(file) != digest:
            raise LoadError(f"snapshot {directory} was altered: {name} does not match the"
                            f" checksum in {MANIFEST}")
    return snapshot


def _text(value: Any, field_name: str) -> str:
    """A manifest's text, its terminal control characters escaped (it is printed)."""
    if not isinstance(value, str):
        raise TypeError(f"{field_name} is {type(value).__name__}, not text")
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], value)


def _optional_int(value: Any, field_name: str) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise TypeError(f"{field_name} is {type(value).__name__}, not a number")
    return value


def _texts(values: Any, field_name: str) -> tuple[str, ...]:
    if not isinstance(values, list):
        raise TypeError(f"{field_name} is {type(values).__name__}, not a list")
    return tuple(_text(v, field_name) for v in values)


def _text_map(value: Any, field_name: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise TypeError(f"{field_name} is {type(value).__name__}, not an object")
    return {_text(k, field_name): _text(v, field_name) for k, v in value.items()}


def _from_json(data: Any) -> Snapshot:
    if not isinstance(data, dict):
        raise TypeError(f"it is a JSON {type(data).__name__}, not an object")
    if data.get("format") not in READABLE_FORMATS:
        raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
    trigger = data["trigger"]
    if not isinstance(trigger, dict):
        raise TypeError("trigger is not an object")
    step = _optional_int(data["step"], "step")
    if step is None or step < 0:
        raise ValueError(f"step {step!r}")
    structure = _text(data["batch_structure"], "batch_structure")
    if structure not in ("xy", "args"):
        raise ValueError(f"batch_structure {structure!r}")
    keys = _texts(data["batch_keys"], "batch_keys")
    if not keys or any(k not in ("x", "y", "sample_weight") if structure == "xy"
                       else not re.fullmatch(r"arg\d{1,3}", k) for k in keys):
        raise ValueError(f"batch_keys {list(keys)!r} for batch_structure {structure!r}")
    loss = data["loss"]
    if not isinstance(loss, dict) or loss.get("kind") not in ("compiled", "function"):
        raise ValueError(f"loss {loss!r}")
    keras = _text(data["keras"], "keras")
    if keras not in KERAS_PACKAGES:
        raise ValueError(f"keras {keras!r}, not one of {', '.join(KERAS_PACKAGES)}")
    modules = data.get("modules", [])
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise TypeError("modules is not a list of objects")
    diagnosis = data.get("diagnosis", {})
    return Snapshot(
        step=step, epoch=_optional_int(data.get("epoch"), "epoch"),
        batch=_optional_int(data.get("batch"), "batch"),
        trigger=Trigger(_text(trigger["kind"], "trigger.kind"),
                        _text(trigger["message"], "trigger.message"),
                        _texts(trigger.get("weights", []), "trigger.weights")),
        keras=keras,
        loss={k: _text(v, "loss") for k, v in loss.items() if k != "file"},
        batch_keys=keys, batch_structure=structure,
        modules=tuple({"module": _text(m["module"], "modules")} for m in modules),
        custom_objects=_text_map(data.get("custom_objects", {}), "custom_objects"),
        versions=_text_map(data.get("versions", {}), "versions"),
        files=_text_map(data["files"], "files"),
        diagnosis=diagnosis if isinstance(diagnosis, dict) else {})
