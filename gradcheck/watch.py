"""gradcheck.Watch: a Keras callback (and one call per step of a custom loop) that catches the
step where training breaks, keeps a snapshot of it and has it diagnosed in a worker process."""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gradcheck.load.snapshot import Trigger
from gradcheck.snapshot_writer import Capture, SnapshotWriter, finding, module_of

# Consecutive steps a LossScaleOptimizer may skip before the run is said to be stuck, and the
# scale below which loss scaling no longer helps (the unscaled gradient itself overflows).
MAX_SKIPPED_STEPS = 20
LOSS_SCALE_FLOOR = 1.0
DIAGNOSIS_TIMEOUT = 600.0
# Batches between two reads of fit's gate when it stops by itself (stop=True, no loss scale,
# no health history to keep in step):
# each read waits for the step, and a stopped gate applies no update until it is read.
LOOK_EVERY = 16
# Steps of per-weight gradient norms a snapshot keeps (health=True).
HEALTH_STEPS = 200


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _writable_directory(directory: str | os.PathLike[str]) -> Path:
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise ValueError(f"gradcheck.Watch: directory {str(path)!r} exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"gradcheck.Watch: cannot create directory {str(path)!r}:"
                         f" {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"gradcheck.Watch: directory {str(path)!r} is not writable")
    return path


class Watch:
    """Watch training for the step whose gradient breaks: a non-finite loss or gradient, a
    trainable weight with no gradient, a LossScaleOptimizer skipping step after step.

    Give it to fit (`model.fit(x, y, callbacks=[gradcheck.Watch()])`, Keras 3 or tf-keras), or
    call `watch.step(...)` once per step of a custom loop. On a trigger, before the update is
    applied, it writes DIRECTORY/step-NNNNNN (the batch, the weights and optimizer state, what
    rebuilds the loss, and gradcheck's diagnosis of that step), keeping the newest `keep`; with
    `stop=True` training ends with the weights of the last good step.
    """

    def __init__(self, directory: str | os.PathLike[str] = "gradcheck-snapshots", stop: bool = True,
                 keep: int = 5, health: bool = False, tensorboard: str | None = None,
                 diagnose: bool = True, timeout: float = DIAGNOSIS_TIMEOUT,
                 log: Callable[[str], Any] = _stderr) -> None:
        if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
            raise ValueError(f"gradcheck.Watch: keep must be a positive number, got {keep!r}")
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"gradcheck.Watch: timeout must be positive seconds, got {timeout!r}")
        if tensorboard is not None and not health:
            raise ValueError("gradcheck.Watch: tensorboard= writes what health=True records;"
                             " pass health=True too")
        if tensorboard is not None and importlib.util.find_spec("tensorboard") is None:
            raise ValueError("gradcheck.Watch: tensorboard= needs the tensorboard package"
                             " (pip install tensorboard, or 'gradcheck[tensorboard]')")
        self.directory = _writable_directory(directory)
        self.stop, self.keep, self.diagnose, self.timeout = stop, keep, diagnose, timeout
        self._writer = SnapshotWriter(self.directory, keep, diagnose, timeout, log)
        self.health, self.tensorboard = health, tensorboard
        self._history: collections.deque[tuple[int, Any, Any]] = collections.deque(
            maxlen=HEALTH_STEPS)
        self._board: Any = None
        self._loop_gate: Any = None  # a custom loop's step traced in a tf.function
        self._names: tuple[str, ...] = ()
        self.log = log
        self.snapshots: list[Path] = []
        self.stopped = False
        self.model: Any = None
        self.params: dict[str, Any] = {}
        self._fit: Any = None  # the fit under way
        self._watched: Any = None  # its model's watched step, kept for the next fit
        self._epoch: int | None = None
        self._epoch_start = 0
        self._steps = 0  # training steps run (by fit or step()), skipped ones included
        self._skipped = 0
        self._last_scale: float | None = None
        self._loss_scale_told = False
        self._missing_told = False  # a custom loop's missing gradient, told once
        # tf-keras's CallbackList reads these of every callback.
        self._supports_tf_logs = True
        self._chief_worker_only = None

    # Keras callback protocol (duck-typed, so that one class serves Keras 3 and tf-keras).
    def set_params(self, params: dict[str, Any]) -> None:
        self.params = params

    def set_model(self, model: Any) -> None:
        self.model = model

    def _implements_train_batch_hooks(self) -> bool:
        return True

    def _implements_test_batch_hooks(self) -> bool:
        return False

    def _implements_predict_batch_hooks(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        if name.startswith("on_"):  # the hooks Watch has no use for
            return _ignore
        raise AttributeError(name)

    def on_train_begin(self, logs: Any = None) -> None:
        from gradcheck.tf.variables import weight_path
        from gradcheck.tf.watched_fit import WatchedFit

        self.stopped = False
        if self.model.optimizer is None:
            raise ValueError("gradcheck.Watch: the model has no optimizer; compile it first")
        _build_optimizer(self.model)
        cached = self._watched
        if cached is None or cached.model is not self.model or (
                cached.optimizer is not self.model.optimizer):
            self._watched = WatchedFit(self.model, health=self.health)
        self._fit = self._watched
        self._fit.install(self._steps)
        self._names = tuple(weight_path(v) for v in self.model.trainable_weights)

    def on_train_end(self, logs: Any = None) -> None:
        from gradcheck.tf.arrays import as_array

        if self._fit is not None:
            self._look(-1)
            self._steps = int(as_array(self._fit.gate.steps))
            self._fit.uninstall()
            self._fit = None

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        from gradcheck.tf.arrays import as_array

        self._epoch = epoch
        self._epoch_start = int(as_array(self._fit.gate.steps)) if self._fit else self._steps

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        from gradcheck.tf.arrays import as_array

        fit = self._fit
        if fit is None:
            return
        if self.health and fit.gate.norms is not None:
            step = int(as_array(fit.gate.steps)) - 1
            self._recorded(step, as_array(fit.gate.norms), as_array(fit.gate.zeros))
        if self.stop and fit.gate.halts and not self.health and (batch + 1) % LOOK_EVERY:
            return  # a halted gate applies no later update: its trigger can wait to be read
        self._look(batch)

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        if self._fit is not None:
            self._look(-1)

    def _look(self, batch: int) -> None:
        """Read the gate: snapshot the step it stopped, or watch the loss scale."""
        from gradcheck.tf.training import TRIGGER_KINDS, loss_scale
        from gradcheck.tf.variables import weight_path

        fit = self._fit
        if self.stopped:
            return
        found = fit.gate.trigger()
        if found is not None:
            code, step, first_bad = found
            weights = self.model.trainable_weights
            bad = (weight_path(weights[first_bad]),) if 0 <= first_bad < len(weights) else ()
            if code == 3:
                bad = fit.without_gradient
            trigger = Trigger(TRIGGER_KINDS[code], _trigger_message(TRIGGER_KINDS[code], bad),
                              bad)
            x, y, sample_weight = _unpack(fit.gate.kept_batch())
            self._caught(trigger, step, step - self._epoch_start, (x, y, sample_weight),
                         {"kind": "compiled"}, "xy")
            if self.stop:
                self.model.stop_training = self.stopped = True
            else:
                fit.gate.resume()
            return
        scale = loss_scale(self.model.optimizer)
        if scale is not None:
            self._watch_loss_scale(scale, batch)

    def _recorded(self, step: int, norms: Any, zeros: Any) -> None:
        self._history.append((step, norms, zeros))
        if self.tensorboard is not None:
            if self._board is None:
                from gradcheck.tf.keras_snapshot import HealthBoard

                self._board = HealthBoard(self.tensorboard)
            self._board.write(step, self._names, norms, zeros)

    def _watch_loss_scale(self, scale: float, batch: int) -> None:
        if self._last_scale is not None and scale < self._last_scale:
            self._skipped += 1
        elif self._last_scale is not None:
            self._skipped = 0
        self._last_scale = scale
        stuck = self._skipped >= MAX_SKIPPED_STEPS or scale < LOSS_SCALE_FLOOR
        if not stuck or self._loss_scale_told:
            return
        self._loss_scale_told = True
        message = (f"the LossScaleOptimizer skipped {self._skipped} steps in a row; its loss"
                   f" scale fell to {scale:g}" if self._skipped >= MAX_SKIPPED_STEPS else
                   f"the loss scale fell to {scale:g}, below {LOSS_SCALE_FLOOR:g}: the gradient"
                   " overflows even unscaled")
        fit = self._fit
        recorded = fit.gate.last_recorded() if fit is not None else None
        if fit is None or recorded is None:
            self.log(f"gradcheck.Watch: {message}")
        else:
            x, y, sample_weight = _unpack(fit.gate.kept_batch())
            step = recorded[1]
            self._caught(Trigger("loss-scale", message + f"; the last skipped step was {step}"),
                         step, step - self._epoch_start, (x, y, sample_weight),
                         {"kind": "compiled"}, "xy")
        if self.stop:
            self.model.stop_training = True

    # The custom-loop entry point.
    def step(self, model: Any, optimizer: Any, tape: Any, loss: Any, batch: Sequence[Any],
             loss_fn: Callable[..., Any] | None = None) -> bool:
        """One custom-loop step: the gradients of `loss` (taken on `tape`) for the model's
        trainable weights, checked, then applied with `optimizer` unless they trigger. `batch`
        is what `loss_fn(model, *batch)` (a module-level function) computes the loss from; it
        rebuilds the loss for the diagnosis. Returns False when training should stop (inside a
        tf.function, a boolean tensor: read `watch.stopped` after the call)."""
        from gradcheck.tf.keras_snapshot import eager_health
        from gradcheck.tf.training import TRIGGER_KINDS, custom_loop_verdict, in_graph
        from gradcheck.tf.variables import weight_path

        self.model = model
        loss_spec = ({"kind": "function", **(module_of(loss_fn) or {}),
                      "qualname": getattr(loss_fn, "__qualname__", "")}
                     if loss_fn is not None else {"kind": "compiled"})
        structure = "args" if loss_fn is not None else "xy"
        if in_graph():
            return self._step_in_graph(model, optimizer, tape, loss, batch, loss_spec, structure)
        weights = model.trainable_variables
        gradients = tape.gradient(loss, weights)
        code, index = custom_loop_verdict(loss, gradients)
        if self.health:
            self._names = tuple(weight_path(v) for v in weights)
            self._recorded(self._steps, *eager_health(gradients))
        if code == 0 or (code == 3 and self._missing_told):
            self._steps += 1
            optimizer.apply_gradients((g, v) for g, v in zip(gradients, weights)
                                      if g is not None)
            return True
        names = ((weight_path(weights[index]),) if code != 3 else
                 tuple(weight_path(v) for v, g in zip(weights, gradients) if g is None))
        kind = TRIGGER_KINDS[code]
        step = self._steps
        self._steps += 1
        self._caught(Trigger(kind, _trigger_message(kind, names), names), step, None,
                     tuple(batch), loss_spec, structure)
        if code == 3:
            self._missing_told = True  # a missing gradient is told once
            if not self.stop:
                optimizer.apply_gradients((g, v) for g, v in zip(gradients, weights)
                                          if g is not None)
        if self.stop:
            self.stopped = True
        return not self.stop

    def _step_in_graph(self, model: Any, optimizer: Any, tape: Any, loss: Any,
                       batch: Sequence[Any], loss_spec: dict[str, Any], structure: str) -> Any:
        """watch.step traced in a tf.function: gated in-graph; the snapshot is written from a
        tf.py_function on the step that fires (not under XLA). Returns a boolean tensor; the
        loop reads watch.stopped."""
        from gradcheck.tf.training import TRIGGER_KINDS, Gate, gated_graph_step, in_xla
        from gradcheck.tf.variables import weight_path

        if in_xla():
            raise ValueError(
                "gradcheck.Watch: watch.step cannot run inside an XLA-compiled step"
                " (jit_compile=True): compile the model's forward and backward pass with XLA"
                " and call watch.step in a tf.function without jit_compile, or use"
                " model.fit(callbacks=[watch]) with jit_compile=True")
        if self._loop_gate is None:
            self._loop_gate = Gate()
        gate = self._loop_gate
        weights = model.trainable_variables

        def report(values: Any) -> None:
            found = gate.trigger()
            if found is None:
                return
            code, step, first_bad = found
            names = (weight_path(weights[first_bad]),) if 0 <= first_bad < len(weights) else ()
            kind = TRIGGER_KINDS[code]
            self._caught(Trigger(kind, _trigger_message(kind, names), names), step, None,
                         tuple(values), loss_spec, structure)
            if self.stop:
                self.stopped = True
            else:
                gate.resume()

        self._names = tuple(weight_path(v) for v in weights)
        return gated_graph_step(gate, model, optimizer, tape, loss, tuple(batch), report,
                                self._recorded if self.health else None)

    def _caught(self, trigger: Trigger, step: int, batch_index: int | None,
                batch: Sequence[Any], loss: dict[str, Any], structure: str) -> None:
        where = f"step {step}" + (f" (epoch {self._epoch}, batch {batch_index})"
                                  if self._epoch is not None and batch_index is not None else "")
        self.log(f"gradcheck.Watch: {where}: {trigger.message}; update not applied")
        capture = Capture(trigger, step, self._epoch, batch_index, batch, loss, structure,
                          self._health_arrays(step) if self._history else None)
        try:
            path = self._writer.write(self.model, capture)
        except Exception as exc:
            self.log(f"gradcheck.Watch: warning: could not write the snapshot of step {step}:"
                     f" {type(exc).__name__}: {exc}")
            return
        self.snapshots = [p for p in self.snapshots if p.exists() and p != path] + [path]
        self.log(f"gradcheck.Watch: snapshot {path}: {finding(path)}"
                 + ("; training stopped with the weights before this step" if self.stop else ""))

    def _health_arrays(self, failing: int) -> dict[str, Any]:
        import numpy as np

        return {"names": np.asarray(self._names, dtype=str),
                "steps": np.asarray([s for s, _, _ in self._history], np.int64),
                "norms": np.stack([n for _, n, _ in self._history]),
                "zeros": np.stack([z for _, _, z in self._history]),
                "failing_step": np.asarray(failing, np.int64)}

def _ignore(*args: Any, **kwargs: Any) -> None:
    return None


def _build_optimizer(model: Any) -> None:
    """Create the optimizer's slots before fit traces (they are created inside the gated update
    otherwise)."""
    optimizer = model.optimizer
    build = getattr(optimizer, "build", None)
    if callable(build) and not getattr(optimizer, "built", True) and model.trainable_weights:
        with contextlib.suppress(Exception):  # tf-keras builds in apply_gradients anyway
            build(model.trainable_weights)


def _trigger_message(kind: str, weights: Sequence[str]) -> str:
    named = f" for {', '.join(weights)}" if weights else ""
    return {"non-finite-loss": "the loss is not finite",
            "non-finite-gradient": f"the gradient{named} is not finite",
            "no-gradient": f"no gradient{named} (Keras: 'Gradients do not exist for variables')",
            }[kind]


def _unpack(data: Any) -> tuple[Any, Any, Any]:
    if isinstance(data, (tuple, list)):
        items = list(data) + [None, None]
        return items[0], items[1], items[2]
    return data, None, None


