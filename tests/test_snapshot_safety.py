"""Snapshots are data: names no run shares, pruning of a run's own, reports that never write
through what a snapshot holds, and replay of damaged or hostile snapshots (every manifest field,
every array file, symlinks, permissions): exit 2 or a correct replay, never code run, never a
file written, never exit 4."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gradcheck
from gradcheck.errors import GradcheckError
from gradcheck.training.replay import Replay, check_snapshot
from gradcheck.training.snapshot import leftover_partials, write_report_files
from gradcheck.training.step import step_options

TRAINING = Path(__file__).resolve().parent.parent / "fixtures" / "training"
sys.path.insert(0, str(TRAINING))

import live_models  # noqa: E402

RAN = "pathlib.Path(__file__).with_name('RAN').write_text('ran')\n"
CANARY = f"import pathlib\n{RAN}def boom(*args, **kwargs):\n    {RAN}"


def _watched_fit(directory: Path, keep: int = 5, diagnose: bool = False) -> gradcheck.Watch:
    model = live_models.lambda_model(fixed=False)
    x, y = live_models.data()
    watch = gradcheck.Watch(directory, keep=keep, diagnose=diagnose, stop=False,
                            log=lambda line: None)
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=[watch])
    return watch


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real snapshot of a fit whose exponential activation overflows (built-in parts only:
    replay rebuilds it from the snapshot alone)."""
    directory = tmp_path_factory.mktemp("original")
    model = live_models.builtin_model()
    x, y = live_models.data()
    x[4] = 200.0  # step 0
    watch = gradcheck.Watch(directory, diagnose=False, log=lambda line: None)
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=[watch])
    [snapshot] = watch.snapshots
    return snapshot


def test_two_runs_into_one_directory_keep_both_and_prune_only_their_own(tmp_path):
    first = _watched_fit(tmp_path, keep=1)
    second = _watched_fit(tmp_path, keep=1)
    [mine], [theirs] = first.snapshots, second.snapshots
    assert mine.name == "step-000001" and theirs.name.startswith("step-000001-")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, theirs.name])
    third = _watched_fit(tmp_path, keep=1)
    assert len({*first.snapshots, *second.snapshots, *third.snapshots}) == 3
    assert all(p.exists() for p in (mine, theirs, *third.snapshots))


def test_a_partial_snapshot_of_a_killed_writer_is_removed_by_the_next_run(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = tmp_path / f".step-000004.partial-{dead.pid}-0123abcd"
    alive = tmp_path / f".step-000004.partial-{os.getpid()}-0123abcd"
    for folder in (left, alive):
        folder.mkdir()
        (folder / "batch.npz").write_bytes(b"half")
    assert leftover_partials(tmp_path, lambda pid: pid == os.getpid()) == [left]
    _watched_fit(tmp_path)
    assert not left.exists() and alive.exists()


def test_reports_never_write_through_a_symlink_nor_over_a_file(tmp_path):
    target = tmp_path / "victim.txt"
    target.write_text("mine")
    snapshot = tmp_path / "snap"
    snapshot.mkdir()
    (snapshot / "report.txt").symlink_to(target)
    with pytest.raises(GradcheckError, match="already exists"):
        write_report_files(snapshot, {"report.json": b"{}", "report.txt": b"x"})
    assert target.read_text() == "mine" and not (snapshot / "report.json").exists()
    (snapshot / "report.txt").unlink()
    write_report_files(snapshot, {"report.json": b"{}", "report.txt": b"x"})
    assert sorted(p.name for p in snapshot.iterdir()) == ["report.json", "report.txt"]


def test_replay_output_never_names_a_file_of_the_snapshot(original, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    before = (copy / "batch.npz").read_bytes()
    done = subprocess.run([sys.executable, "-m", "gradcheck", "replay", str(copy), "-o",
                           str(copy / "batch.npz")], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("Error: -o"), done.stderr
    assert (copy / "batch.npz").read_bytes() == before


def _rehash(snapshot: Path) -> None:
    manifest = json.loads((snapshot / "snapshot.json").read_text())
    manifest["files"] = {name: hashlib.sha256((snapshot / name).read_bytes()).hexdigest()
                         for name in manifest["files"] if (snapshot / name).is_file()}
    (snapshot / "snapshot.json").write_text(json.dumps(manifest))


def _manifest_edit(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def edit(snapshot: Path) -> None:
        manifest = json.loads((snapshot / "snapshot.json").read_text())
        change(manifest)
        (snapshot / "snapshot.json").write_text(json.dumps(manifest))
    return edit


def _field_mutations() -> dict[str, Callable[[Path], None]]:
    mutations: dict[str, Callable[[Path], None]] = {}
    fields = ["format", "step", "epoch", "batch", "trigger", "keras", "loss", "batch_keys",
              "batch_structure", "modules", "custom_objects", "versions", "files", "diagnosis"]
    for field in fields:
        for name, value in (("missing", KeyError), ("null", None), ("number", -7),
                            ("text", "\x1b[2Jos"), ("list", [1, {"a": None}]),
                            ("object", {"module": "canary"})):
            def change(manifest: dict[str, Any], field: str = field, value: Any = value) -> None:
                if value is KeyError:
                    manifest.pop(field, None)
                else:
                    manifest[field] = value
            mutations[f"{field}-{name}"] = _manifest_edit(change)
    hostile = {
        "keras-os": lambda m: m.update(keras="os"),
        "module-canary": lambda m: m.update(modules=[{"module": "canary"}]),
        "custom-canary": lambda m: m.update(custom_objects={"Dense": "canary:boom"}),
        "loss-canary": lambda m: m.update(loss={"kind": "function", "module": "canary",
                                                "qualname": "boom"}),
        "loss-path": lambda m: m.update(loss={"kind": "function", "module": "../../canary",
                                              "qualname": "boom"}),
        "files-outside": lambda m: m["files"].update({"../../etc/passwd": "0" * 64}),
        "trigger-escape": lambda m: m["trigger"].update(message="\x1b]0;owned\x07 \x1b[31mred"),
        "batch-keys-other": lambda m: m.update(batch_keys=["x", "__class__"]),
    }
    mutations.update({name: _manifest_edit(change) for name, change in hostile.items()})
    mutations["deep-nesting"] = lambda s: (s / "snapshot.json").write_text(
        (s / "snapshot.json").read_text().replace('"step"', '"deep": ' + "[" * 50000
                                                  + "]" * 50000 + ', "step"', 1))
    mutations["manifest-not-json"] = lambda s: (s / "snapshot.json").write_bytes(b"\xff{")
    mutations["manifest-array"] = lambda s: (s / "snapshot.json").write_text("[1, 2]")
    mutations["manifest-huge"] = lambda s: (s / "snapshot.json").write_text(" " * (2 << 20))
    return mutations


def _array_mutations() -> dict[str, Callable[[Path], None]]:
    def truncated(s: Path) -> None:
        data = (s / "batch.npz").read_bytes()
        (s / "batch.npz").write_bytes(data[: len(data) // 2])
        _rehash(s)

    def object_array(s: Path) -> None:
        with zipfile.ZipFile(s / "batch.npz", "w") as archive:
            stream = io.BytesIO()
            np.lib.format.write_array(stream, np.array([{"a": 1}], dtype=object),
                                      allow_pickle=True)
            archive.writestr("x.npy", stream.getvalue())
        _rehash(s)

    def lying_header(s: Path) -> None:
        with zipfile.ZipFile(s / "batch.npz", "w") as archive:
            stream = io.BytesIO()
            np.lib.format.write_array_header_1_0(
                stream, {"descr": "<f4", "fortran_order": False, "shape": (10 ** 12, 10 ** 3)})
            archive.writestr("x.npy", stream.getvalue() + b"\0" * 64)
        _rehash(s)

    def wrong_arrays(s: Path) -> None:
        np.savez(s / "batch.npz", y=np.zeros(3, np.float32))
        _rehash(s)

    def symlinked(s: Path) -> None:
        (s / "batch.npz").unlink()
        (s / "batch.npz").symlink_to("/etc/hostname")
        _rehash(s)

    def unreadable(s: Path) -> None:
        (s / "batch.npz").chmod(0)

    def junk_model(s: Path) -> None:
        (s / "model.keras").write_bytes(b"PK\x03\x04 not a zip")
        _rehash(s)

    def junk_health(s: Path) -> None:
        (s / "health.npz").write_bytes(b"\0" * 100)
        manifest = json.loads((s / "snapshot.json").read_text())
        manifest["files"]["health.npz"] = ""
        (s / "snapshot.json").write_text(json.dumps(manifest))
        _rehash(s)

    def directory_is_symlink(s: Path) -> None:
        (s / "model.keras").unlink()
        (s / "model.keras").symlink_to(s.parent)

    return {"truncated-npz": truncated, "object-array": object_array,
            "lying-header": lying_header, "wrong-arrays": wrong_arrays,
            "symlinked-batch": symlinked, "unreadable-batch": unreadable,
            "junk-model": junk_model, "junk-health": junk_health,
            "model-symlink-to-dir": directory_is_symlink}


MUTATIONS = {**_field_mutations(), **_array_mutations()}


def _listing(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.lstat().st_size for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_mutated_snapshot_is_exit_2_or_replayed_never_code_run(name, original, tmp_path):
    if name == "unreadable-batch" and os.geteuid() == 0:
        pytest.skip("root reads a file whatever its permissions")
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "canary.py").write_text(CANARY)
    snapshot = tmp_path / "snapshot"
    shutil.copytree(original, snapshot, symlinks=True)
    MUTATIONS[name](snapshot)
    before = _listing(tmp_path)
    try:
        report = check_snapshot(Replay(str(snapshot), str(tmp_path / "code")),
                                step_options("non-finite-loss"))
    except GradcheckError as error:
        assert int(error.exit_code) == 2, (name, error.message)
        assert "\x1b" not in error.message and "\n" not in error.message
    else:
        assert report.exit_code == 1 and "\x1b" not in report.target, name
    assert not (tmp_path / "code" / "RAN").exists(), f"{name} ran the snapshot's code"
    assert _listing(tmp_path) == before, f"{name} wrote a file"
    sys.modules.pop("canary", None)


KILLED_IN_DIAGNOSIS = """
import os, signal, sys
import numpy as np, tensorflow as tf, keras
import gradcheck

diagnosing = []

def loss_fn(model, x, y):
    if diagnosing:  # the user's loss crashes the process while Watch diagnoses the step
        os.kill(os.getpid(), signal.SIGKILL)
    return tf.reduce_mean(tf.square(tf.math.log(model(x)) - y))

def log(line):
    print(line, flush=True)
    if "update not applied" in line:
        diagnosing.append(True)

keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, kernel_initializer="ones",
                                                               bias_initializer="ones")])
optimizer = keras.optimizers.SGD(0.01)
watch = gradcheck.Watch("snapshots", log=log)
x = np.abs(np.random.default_rng(0).normal(size=(32, 3))).astype("float32")
x[20] = -5.0
y = np.zeros((32, 1), "float32")
for i in range(2):
    with tf.GradientTape() as tape:
        loss = loss_fn(model, x[16 * i:16 * i + 16], y[:16])
    watch.step(model, optimizer, tape, loss, (x[16 * i:16 * i + 16], y[:16]), loss_fn=loss_fn)
"""


def test_a_process_killed_during_the_diagnosis_leaves_its_snapshot_complete(tmp_path):
    from gradcheck.training.snapshot import read_snapshot

    script = tmp_path / "train.py"
    script.write_text(KILLED_IN_DIAGNOSIS)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == -9, done.stderr
    assert [p.name for p in (tmp_path / "snapshots").iterdir()] == ["step-000001"]
    snapshot = read_snapshot(tmp_path / "snapshots" / "step-000001")
    assert snapshot.trigger.kind == "non-finite-loss" and "weights.npz" not in snapshot.files
    assert not (tmp_path / "snapshots" / "step-000001" / "report.json").exists()
