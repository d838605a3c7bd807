"""The on-disk form of a training snapshot (gradcheck.Watch writes it, `gradcheck replay` reads
it): `snapshot.json` and its arrays, checksummed, written under a temporary name and renamed."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gradcheck.errors import LoadError

FORMAT = 1
MANIFEST = "snapshot.json"
MODEL_FILE = "model.keras"
BATCH_FILE = "batch.npz"
WEIGHTS_FILE = "weights.npz"
HEALTH_FILE = "health.npz"  # per-weight gradient norms of the last steps (health=True)
HEALTH_PLOT = "health.png"
DATA_FILES = (MODEL_FILE, BATCH_FILE, WEIGHTS_FILE, HEALTH_FILE)
REPORT_JSON, REPORT_TEXT = "report.json", "report.txt"
_STEP_NAME = re.compile(r"^step-(\d{6,})$")


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
    # How the loss is rebuilt: {"kind": "compiled"} (the model's compiled loss) or
    # {"kind": "function", "module": ..., "qualname": ..., "file": ...} (loss_fn(model, *batch)).
    loss: Mapping[str, Any]
    batch_keys: tuple[str, ...]  # the batch's arrays in order: x, y, sample_weight or x0, x1...
    batch_structure: str  # "xy": (x, y[, sample_weight]) for fit; "args": loss_fn's arguments
    # Modules of the user's own classes and functions the model and loss need, each as
    # {"module": name, "file": path or None}, imported (never read from the snapshot) on replay.
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
    """flatten_batch undone, in the order of `names` (sequences come back as lists)."""
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


def load_arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def write_manifest(directory: Path, snapshot: Snapshot) -> Snapshot:
    """Checksum the files present and write snapshot.json (the last file of a snapshot's data)."""
    files = {name: _sha256(directory / name) for name in DATA_FILES
             if (directory / name).is_file()}
    snapshot = Snapshot(**{**snapshot.__dict__, "files": files})
    _write_text(directory / MANIFEST, json.dumps(snapshot.as_json(), indent=2) + "\n")
    return snapshot


def _write_text(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def write_report_files(directory: Path, json_text: str, table_text: str) -> None:
    _write_text(directory / REPORT_JSON, json_text)
    _write_text(directory / REPORT_TEXT, table_text)


def publish(partial: Path, final: Path) -> None:
    """Rename a complete snapshot into place (an older one of the same step is replaced)."""
    if final.exists():
        stale = final.with_name(final.name + f".stale-{os.getpid()}")
        os.replace(final, stale)
        shutil.rmtree(stale, ignore_errors=True)
    os.replace(partial, final)


def snapshots_in(directory: Path) -> list[Path]:
    """The complete snapshots in a Watch directory, oldest step first."""
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir()
             if (m := _STEP_NAME.match(p.name)) and (p / MANIFEST).is_file()]
    return [path for _, path in sorted(found)]


def prune(directory: Path, keep: int) -> None:
    """Remove all but the newest `keep` snapshots."""
    for old in snapshots_in(directory)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)


def read_snapshot(directory: str | Path) -> Snapshot:
    """snapshot.json of a complete, unaltered snapshot; a LoadError (exit 2) in one line for a
    missing, partial or altered one."""
    path = Path(directory)
    if not path.exists():
        raise LoadError(f"snapshot {directory} does not exist")
    if not path.is_dir():
        raise LoadError(f"snapshot {directory} is not a directory (gradcheck.Watch writes"
                        " DIRECTORY/step-NNNNNN directories)")
    manifest = path / MANIFEST
    if not manifest.is_file():
        raise LoadError(f"snapshot {directory} is partial or not a snapshot: it has no {MANIFEST}")
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        snapshot = _from_json(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise LoadError(f"snapshot {directory}: {MANIFEST} is not a gradcheck snapshot"
                        f" manifest ({type(exc).__name__}: {exc})") from None
    for name in (BATCH_FILE,):
        if name not in snapshot.files:
            raise LoadError(f"snapshot {directory} is partial: its manifest lists no {name}")
    for name, digest in snapshot.files.items():
        if not (path / name).is_file():
            raise LoadError(f"snapshot {directory} is partial: {name} is missing")
        if _sha256(path / name) != digest:
            raise LoadError(f"snapshot {directory} was altered: {name} does not match the"
                            f" checksum in {MANIFEST}")
    return snapshot


def _from_json(data: Mapping[str, Any]) -> Snapshot:
    if data.get("format") != FORMAT:
        raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
    trigger = data["trigger"]
    return Snapshot(
        step=int(data["step"]), epoch=data.get("epoch"), batch=data.get("batch"),
        trigger=Trigger(str(trigger["kind"]), str(trigger["message"]),
                        tuple(trigger.get("weights", ()))),
        keras=str(data["keras"]), loss=dict(data["loss"]),
        batch_keys=tuple(data["batch_keys"]), batch_structure=str(data["batch_structure"]),
        modules=tuple(dict(m) for m in data.get("modules", ())),
        custom_objects=dict(data.get("custom_objects", {})),
        versions=dict(data.get("versions", {})), files=dict(data["files"]),
        diagnosis=dict(data.get("diagnosis", {})))
