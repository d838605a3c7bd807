"""`gradcheck replay`'s path for each kind of model and loss (a module's, a script's or
notebook's `__main__`, a closure, subclassed, a tf.Module, a compiled custom loss): every
refusal is one line that names the option that works, and that option replays the step as
Watch diagnosed it live. Also: a folder of snapshots, a refused -o, a hostile model.keras."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import types
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gradcheck
from gradcheck.errors import GradcheckError
from gradcheck.report import Report
from gradcheck.training.replay import Replay, check_snapshot
from gradcheck.training.snapshot import read_snapshot
from gradcheck.training.step import step_options

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
REPLAY, TRAINING = FIXTURES / "replay", FIXTURES / "training"
sys.path.insert(0, str(REPLAY))
sys.path.insert(0, str(TRAINING))

import build_read  # noqa: E402
import replay_models as rm  # noqa: E402


def _as_main(function: Callable[..., Any]) -> Callable[..., Any]:
    """The function as a training script or a notebook cell defines it (module __main__)."""
    copy = types.FunctionType(function.__code__, function.__globals__, function.__name__)
    copy.__module__ = "__main__"
    return copy


def _fit(directory: Path, model: Any, data: tuple[Any, Any] | None = None) -> Path:
    watch = gradcheck.Watch(directory, log=lambda line: None)
    x, y = data or rm.data()
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=[watch])
    [snapshot] = watch.snapshots
    return snapshot


def _loop(directory: Path, loss_fn: Callable[..., Any]) -> Path:
    import keras
    import tensorflow as tf

    model, optimizer = rm.Linear(), keras.optimizers.SGD(0.01)
    watch = gradcheck.Watch(directory, log=lambda line: None)
    x, y = rm.data()
    for i in range(4):
        batch = (x[16 * i:16 * i + 16], y[16 * i:16 * i + 16])
        with tf.GradientTape() as tape:
            loss = loss_fn(model, *batch)
        if not watch.step(model, optimizer, tape, loss, batch, loss_fn=loss_fn):
            break
    [snapshot] = watch.snapshots
    return snapshot


@pytest.fixture(scope="module")
def snaps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One snapshot per kind of model and loss, each made once by a short real fit."""
    root = tmp_path_factory.mktemp("snaps")
    subclassed = rm.make_subclassed()
    subclassed.compile(optimizer="sgd", loss=rm.msle)

    def closure_step(model: Any, x: Any, y: Any) -> Any:
        return rm.msle_step(model, x, y)

    return {
        "module": _fit(root / "module", rm.make_compiled()),
        "main": _fit(root / "main", rm.make_compiled(_as_main(rm.msle))),
        "closure": _fit(root / "closure", rm.make_compiled(rm.make_msle())),
        "subclassed": _fit(root / "subclassed", subclassed),
        "tf.Module": _loop(root / "loop", rm.msle_step),
        "tf.Module closure": _loop(root / "loop-closure", closure_step),
        "ceil": _fit(root / "ceil", rm.make_ceiled()),
        "build": _fit(root / "build", build_read.make(), build_read.data()),
    }


def _replay(snapshot: Path, **given: Any) -> Report:
    trigger = read_snapshot(snapshot).trigger.kind
    return check_snapshot(Replay(str(snapshot), **{"path": str(REPLAY), **given}),
                          step_options(trigger))


def _refusal(snapshot: Path, **given: Any) -> str:
    with pytest.raises(GradcheckError) as caught:
        _replay(snapshot, **given)
    assert int(caught.value.exit_code) == 2
    message = caught.value.message
    assert "\n" not in message and f"{snapshot}/report.txt" in message, message
    return message


def _live(snapshot: Path) -> list[tuple[str, str, str | None, str]]:
    """The live diagnosis' findings (a closure's lines as its copy in a module has them)."""
    text = (snapshot / "report.json").read_text()
    text = text.replace(f"replay_models.py:{rm.CLOSURE_LINE}", f"replay_models.py:{rm.LOG_LINE}")
    report = json.loads(text.replace("msle_closure", "msle"))
    return [(c["check"], c["status"], c["location"], c["message"]) for c in report["checks"]
            if c["status"] in ("fail", "warn")]


def _same_as_live(report: Report, snapshot: Path) -> None:
    found = [(c.check.value, c.status.value, str(c.location) if c.location else None,
              c.message) for c in report.checks if c.status.value in ("fail", "warn")]
    assert found == _live(snapshot) and found, (found, _live(snapshot))


# kind -> (the refusal's words, the options that then replay the step)
PATHS = {
    "module": ("its compiled loss is replay_models:msle, code replay runs only when you say so:"
               " pass --loss replay_models:msle (or --trust, for a snapshot you made)",
               {"loss": "replay_models:msle"}),
    "main": ("its compiled loss msle was defined in the script or notebook that trained"
             " (__main__), which replay never runs: pass --loss MODULE:msle",
             {"loss": "replay_models:msle"}),
    "closure": ("its compiled loss msle_closure was defined inside a function, which replay"
                " never runs: pass --loss MODULE:msle_closure",
                {"loss": "replay_models:msle"}),  # the closure's loss, written in a module
    "subclassed": ("pass --loss replay_models:msle and --model MODULE:FUNCTION, a function that"
                   " builds it (its weights are in weights.npz)",
                   {"model": "replay_models:make_subclassed", "loss": "replay_models:msle"}),
    "tf.Module": ("pass --loss replay_models:msle_step and --model MODULE:FUNCTION, a function"
                  " that builds it (its weights are in weights.npz)",
                  {"model": "replay_models:Linear", "loss": "replay_models:msle_step"}),
    "tf.Module closure": ("its loss snaps.<locals>.closure_step was defined inside a function,"
                          " which replay never runs; its model could not be saved as .keras",
                          {"model": "replay_models:Linear", "loss": "replay_models:msle_step"}),
}


@pytest.mark.parametrize("kind", sorted(PATHS))
def test_each_refusal_names_the_options_that_replay_the_step(kind, snaps):
    words, options = PATHS[kind]
    message = _refusal(snaps[kind])
    assert words in message, message
    _same_as_live(_replay(snaps[kind], **options), snaps[kind])


def test_a_compiled_loss_is_replayed_with_trust_or_by_a_factory_that_compiles_it(snaps):
    _same_as_live(_replay(snaps["module"], trust=True), snaps["module"])
    _same_as_live(_replay(snaps["module"], model="replay_models:make_compiled"), snaps["module"])
    as_step = _replay(snaps["module"], loss="replay_models:msle_step")  # not in compile_loss
    assert [(c.check, c.status, c.location) for c in as_step.checks] == [
        (c.check, c.status, c.location) for c in _replay(snaps["module"], trust=True).checks]


def test_a_factory_without_the_compiled_loss_is_told_the_loss_to_pass(snaps):
    message = _refusal(snaps["module"], model="replay_models:make_model")
    assert "is not compiled" in message and "pass --loss replay_models:msle as well" in message
    _same_as_live(_replay(snaps["module"], model="replay_models:make_model",
                          loss="replay_models:msle"), snaps["module"])


def test_a_keras_form_loss_replays_a_tf_module_step(snaps):
    report = _replay(snaps["tf.Module"], model="replay_models:Linear", loss="replay_models:msle")
    _same_as_live(report, snaps["tf.Module"])


def test_trust_from_another_folder_names_path(snaps, tmp_path):
    done = _cli(str(snaps["ceil"]), "--trust", "--path", str(tmp_path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "pass --path DIR, the folder that holds replay_models.py" in done.stderr


@pytest.mark.parametrize("kind", ["ceil", "build"])
def test_a_weight_without_gradient_is_the_finding_in_replay_as_live(kind, snaps):
    live = _live(snaps[kind])
    assert any(c[0] == "connected" and c[1] in ("fail", "warn") for c in live), live
    _same_as_live(_replay(snaps[kind], trust=True, path=str(REPLAY if kind == "ceil"
                                                             else TRAINING)), snaps[kind])


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gradcheck", "replay", *args],
                          capture_output=True, text=True)


def test_a_folder_of_snapshots_lists_them_newest_first(snaps, tmp_path):
    parent = tmp_path / "snapshots"
    for name in ("step-000002", "step-000007"):
        shutil.copytree(snaps["module"], parent / name)
    done = _cli(str(parent))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert (f"holds snapshots, it is not one: replay one of them, e.g. gradcheck replay"
            f" {parent}/step-000007 (newest first: {parent}/step-000007,"
            f" {parent}/step-000002)") in done.stderr, done.stderr


def test_a_refused_output_is_never_written(snaps, tmp_path):
    snapshot = tmp_path / "snap"
    shutil.copytree(snaps["module"], snapshot)
    before = (snapshot / "batch.npz").read_bytes()
    done = _cli(str(snapshot), "-o", str(snapshot / "batch.npz"), "--format", "json")
    assert done.returncode == 2 and "which this run reads" in done.stderr, done.stderr
    assert (snapshot / "batch.npz").read_bytes() == before
    assert json.loads(done.stdout)["exit_code"] == 2


def _with_config(snapshot: Path, target: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of the snapshot whose model.keras config is changed (its checksum updated)."""
    import hashlib

    shutil.copytree(snapshot, target)
    model = target / "model.keras"
    with zipfile.ZipFile(snapshot / "model.keras") as source, \
            zipfile.ZipFile(model, "w") as changed:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "config.json":
                config = json.loads(data)
                change(config)
                data = json.dumps(config).encode()
            changed.writestr(item, data)
    manifest = json.loads((target / "snapshot.json").read_text())
    manifest["files"]["model.keras"] = hashlib.sha256(model.read_bytes()).hexdigest()
    (target / "snapshot.json").write_text(json.dumps(manifest))
    return target


@pytest.mark.parametrize("package", ["keras", "tf_keras"])
def test_a_model_file_naming_a_module_imports_nothing_without_trust(package, tmp_path):
    import importlib

    keras = importlib.import_module(package)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = rm.data()
    x[20] = 1e20  # the squared error overflows: a non-finite loss at step 1
    snapshot = _fit(tmp_path / "made", model, (x, y))

    def name_canary(config: dict[str, Any]) -> None:
        layer = config["config"]["layers"][-1]
        layer.update({"module": "replay_canary", "class_name": "Dense"})

    hostile = _with_config(snapshot, tmp_path / "hostile", name_canary)
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "replay_canary.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('RAN').write_text('ran')\n")
    with pytest.raises(GradcheckError) as caught:
        check_snapshot(Replay(str(hostile), str(tmp_path / "code")),
                       step_options("non-finite-loss"))
    assert "replay_canary" in caught.value.message and "--trust" in caught.value.message
    assert not (tmp_path / "code" / "RAN").exists()
    assert "replay_canary" not in sys.modules


def test_a_saved_model_with_a_custom_loss_is_checked_without_its_loss(tmp_path):
    """A ModelCheckpoint file compiled with a custom loss: the check needs no compiled loss, so
    the file loads uncompiled, from a folder where the loss's module is not importable."""
    model = rm.make_compiled()
    model.save(tmp_path / "ckpt.keras")
    done = subprocess.run([sys.executable, "-m", "gradcheck", "check", "ckpt.keras", "--shape",
                           "2,3", "-q"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ckpt.keras" in done.stdout and "Could not locate" not in done.stderr
