"""gradcheck.Watch: a Keras callback (and one call per step of a custom loop) that catches the
step where training breaks, keeps a snapshot of it and diagnoses it on the live model."""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import inspect
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from gradcheck.training.snapshot import Trigger
from gradcheck.training.snapshot_writer import (
    Capture,
    SnapshotWriter,
    loss_record,
    report_files,
    step_finding,
)

# Consecutive steps a LossScaleOptimizer may skip before the run is said to be stuck, and the
# scale below which loss scaling no longer helps (the unscaled gradient itself overflows).
MAX_SKIPPED_STEPS = 20
LOSS_SCALE_FLOOR = 1.0
# Batches between two reads of fit's gate when it stops by itself (stop=True, no loss scale,
# no health history to keep in step):
# each read waits for the step, and a stopped gate applies no update until it is read.
LOOK_EVERY = 16
# Steps of per-weight gradient norms a snapshot keeps (health=True).
HEALTH_STEPS = 200


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _writable_directory(directory: str | os.PathLike[str]) -> Path:
    """The snapshot folder, checked now and created at the first snapshot."""
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise ValueError(f"gradcheck.Watch: directory {str(path)!r} exists and is not a directory")
    existing = next(p for p in (path, *path.absolute().parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"gradcheck.Watch: directory {str(path)!r} cannot be created or written"
                         f" ({str(existing)!r} is not a writable directory)")
    return path


class Watch:
    """Watch training for the step whose gradient breaks: a non-finite loss or gradient, a
    trainable weight with no gradient, a LossScaleOptimizer skipping step after step.

    Give it to fit (`model.fit(x, y, callbacks=[gradcheck.Watch()])`, Keras 3 or tf-keras), or
    call `watch.step(...)` once per step of a custom loop. On a trigger, before the update is
    applied, it publishes DIRECTORY/step-NNNNNN (the batch, the weights and optimizer state),
    then diagnoses the step on the live model (`loss_fn(model, x, y)` when fit's compiled loss
    is not what the step minimises) and stores the report beside it, keeping this run's newest
    `keep`; with `stop=True` training ends with the weights of the last good step. `verbose=0`
    prints only the finding; `health=True` records per-weight gradient norms, written with
    gradient histograms (every `log_freq` steps) to `tensorboard=LOGDIR` (which implies
    health=True).
    """

    _keras = ""  # the package of the keras.callbacks.Callback this class also is

    def __new__(cls, *args: Any, **kwargs: Any) -> Watch:
        """A Watch that is also a keras.callbacks.Callback of the Keras that runs."""
        return super().__new__(_as_callback(_running_keras()) if cls is Watch else cls)

    def __init__(self, directory: str | os.PathLike[str] = "gradcheck-snapshots", stop: bool = True,
                 keep: int = 5, health: bool = False, tensorboard: str | None = None,
                 verbose: int = 1, loss_fn: Callable[..., Any] | None = None,
                 log_freq: int = 100,
                 diagnose: bool = True,
                 log: Callable[[str], Any] = _stderr) -> None:
        """Options as the class says; a `directory` that cannot be written, `keep` or `log_freq`
        below 1, or `tensorboard=` without the tensorboard package is a ValueError now, before
        training."""
        if not isinstance(log_freq, int) or isinstance(log_freq, bool) or log_freq < 1:
            raise ValueError(f"gradcheck.Watch: log_freq must be a positive number of steps,"
                             f" got {log_freq!r}")
        if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
            raise ValueError(f"gradcheck.Watch: keep must be a positive number, got {keep!r}")
        if tensorboard is not None and importlib.util.find_spec("tensorboard") is None:
            raise ValueError("gradcheck.Watch: tensorboard= needs the tensorboard package"
                             " (pip install tensorboard, or 'gradcheck[tensorboard]')")
        self.directory = _writable_directory(directory)
        self.stop, self.keep, self.diagnose = stop, keep, diagnose
        self.verbose, self.loss_fn, self.log_freq = verbose, loss_fn, log_freq
        self.last_report: Any = None  # the Report of the last diagnosis, for a notebook
        self._writer = SnapshotWriter(self.directory, keep, self._say)
        # tensorboard= writes what health=True records: it implies it.
        self.health, self.tensorboard = health or tensorboard is not None, tensorboard
        self._history: collections.deque[tuple[int, Any, Any]] = collections.deque(
            maxlen=HEALTH_STEPS)
        self._board: Any = None
        self._loop_gate: Any = None  # a custom loop's step traced in a tf.function
        self._names: tuple[str, ...] = ()
        self.log = log
        self.stopped = False
        self._after_bar = False
        self.model: Any = None
        self.params: dict[str, Any] = {}
        self._fit: Any = None  # the fit under way
        self._watched: Any = None  # its model's watched step, kept for the next fit
        self._epoch: int | None = None
        self._epoch_start = 0
        self._steps = 0  # training steps run (by fit or step()), skipped ones included
        self._skipped = 0
        self._last_scale: float | None = None
        self._step_line: Any = None  # where a custom loop called watch.step, when it fired
        self._last_skipped = -2  # the last step a LossScaleOptimizer skipped
        self._blind_told = False  # a train_step that updates without apply_gradients
        self._optimizer: Any = None  # a custom loop's (fit's is the model's)
        self._loss_scale_told = False
        self._missing_told = False  # a custom loop's missing gradient, told once
        self._last_trigger: tuple[str, tuple[str, ...], int] | None = None
        self._repeated = 0  # steps in a row that repeated the last snapshot's trigger
        # tf-keras's CallbackList reads these of every callback.
        self._supports_tf_logs = True
        self._chief_worker_only = None

    @property
    def snapshots(self) -> list[Path]:
        """The snapshots this Watch wrote that still exist, oldest first."""
        return self._writer.existing()

    def _say(self, message: str, finding: bool = False) -> None:
        """A line as Keras prints its callbacks' (after the progress bar's line, never inside
        it); under verbose=0 (Watch's or fit's) only the finding."""
        in_fit = self._fit is not None
        quiet = self.verbose == 0 or (in_fit and self.params.get("verbose", 1) == 0)
        if quiet and not finding:
            return
        bar = in_fit and self.params.get("verbose", 1) in (1, "auto") and self._after_bar
        self._after_bar = False
        self.log(("\n" if bar else "") + f"gradcheck.Watch: {message}")

    # Keras callback protocol (Keras 3's and tf-keras').
    @property
    def model(self) -> Any:
        return self.__dict__.get("_watched_model")

    @model.setter
    def model(self, value: Any) -> None:
        self.__dict__["_watched_model"] = value

    def set_params(self, params: dict[str, Any]) -> None:
        self.params = params

    def set_model(self, model: Any) -> None:
        from gradcheck.training.keras_snapshot import keras_package

        package = keras_package(model)
        if package != self._keras:  # fit of the other Keras: its Callback, then
            self.__class__ = _as_callback(package)
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
        from gradcheck.engine.variables import weight_path_in
        from gradcheck.training.watched_fit import WatchedFit, build_optimizer

        self.stopped = False
        _refuse_strategy()
        if self.model.optimizer is None:
            raise ValueError("gradcheck.Watch: the model has no optimizer; compile it first")
        build_optimizer(self.model.optimizer, self.model.trainable_weights)
        cached = self._watched
        if cached is None or cached.model is not self.model or (
                cached.optimizer is not self.model.optimizer):
            histograms = (self._tensorboard().histograms_every(self.log_freq, self.model)
                          if self.tensorboard is not None else None)
            self._watched = WatchedFit(self.model, health=self.health, histograms=histograms)
        self._fit = self._watched
        self._fit.install(self._steps)
        self._names = tuple(weight_path_in(v, self.model) for v in self.model.trainable_weights)

    def on_train_end(self, logs: Any = None) -> None:
        from gradcheck.engine.arrays import as_array

        if self._fit is not None:
            self._look(-1)
            self._tell_repeated()
            self._steps = int(as_array(self._fit.gate.steps))
            self._fit.uninstall()
            self._fit = None

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        from gradcheck.engine.arrays import as_array

        self._epoch = epoch
        self._epoch_start = int(as_array(self._fit.gate.steps)) if self._fit else self._steps

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        from gradcheck.engine.arrays import as_array

        fit = self._fit
        if fit is None:
            return
        self._after_bar = True  # fit's progress bar has just written its line, unended
        if not fit.saw_update and not self._blind_told:
            self._blind_told = True
            self._say("this model's train_step updates its weights without an optimizer's"
                      " apply_gradients, so Watch sees no update and gates none; use"
                      " optimizer.apply_gradients in train_step, or watch.step in a custom"
                      " loop", finding=True)
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
        from gradcheck.training.gate import TRIGGER_KINDS, loss_scale

        fit = self._fit
        if self.stopped:
            return
        found = fit.gate.trigger()
        if found is not None:
            code, step, first_bad = found
            weights = self.model.trainable_weights
            bad = self._named(weights, first_bad)
            if code == 3:
                bad = fit.without_gradient
            batch, shard = fit.gate.kept_replica()
            trigger = Trigger(TRIGGER_KINDS[code], _trigger_message(TRIGGER_KINDS[code], bad,
                                                                    shard), bad)
            x, y, sample_weight = _unpack(batch)
            with _one_replica():
                self._caught(trigger, step, step - self._epoch_start, (x, y, sample_weight),
                             self.loss_fn, "xy")
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
            self._tensorboard().write(step, self._names, norms, zeros)

    def _tensorboard(self) -> Any:
        if self._board is None:
            from gradcheck.training.keras_snapshot import HealthBoard

            self._board = HealthBoard(str(self.tensorboard), self.model)
        return self._board

    def _watch_loss_scale(self, scale: float, batch: int) -> None:
        """Count the steps a LossScaleOptimizer skips in a row; stuck when they are many, or
        when it skips at its floor (tf-keras' stops at 1: every step is then skipped)."""
        from gradcheck.engine.arrays import as_array

        fit = self._fit
        recorded = fit.gate.last_recorded() if fit is not None else None
        current = int(as_array(fit.gate.steps)) - 1 if fit is not None else -1
        skipped = recorded is not None and recorded[1] == current
        if skipped and current != self._last_skipped:
            self._skipped = self._skipped + 1 if current == self._last_skipped + 1 else 1
            self._last_skipped = current
        elif not skipped:
            self._skipped = 0
        # The scale the skipped step ran at: the one read before it (a skip halves it after).
        ran_at = self._last_scale if self._last_scale is not None else scale
        self._last_scale = scale
        at_floor = skipped and ran_at <= LOSS_SCALE_FLOOR
        if not (self._skipped >= MAX_SKIPPED_STEPS or at_floor) or self._loss_scale_told:
            return
        self._loss_scale_told = True
        message = (f"the step overflowed at loss scale {ran_at:g}: its gradient is not finite"
                   " even unscaled" if at_floor else
                   f"the LossScaleOptimizer skipped {self._skipped} steps in a row; its loss"
                   f" scale fell to {scale:g}")
        if fit is None or recorded is None:
            self._say(message, finding=True)
        else:
            x, y, sample_weight = _unpack(fit.gate.kept_batch())
            step = recorded[1]
            self._caught(Trigger("loss-scale", message + f"; the last skipped step was {step}"),
                         step, step - self._epoch_start, (x, y, sample_weight),
                         self.loss_fn, "xy")
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
        from gradcheck.engine.variables import weight_path_in
        from gradcheck.training.gate import TRIGGER_KINDS, applied, custom_loop_verdict, in_graph
        from gradcheck.training.keras_snapshot import eager_health

        self.model, self._optimizer = model, optimizer
        _refuse_strategy()
        structure = "args" if loss_fn is not None else "xy"
        if in_graph():
            return self._step_in_graph(model, optimizer, tape, loss, batch, loss_fn, structure)
        weights = model.trainable_variables
        gradients = tape.gradient(loss, weights)
        code, index = custom_loop_verdict(loss, gradients)
        if self.health:
            self._names = tuple(weight_path_in(v, self.model) for v in weights)
            self._recorded(self._steps, *eager_health(gradients))
            if self.tensorboard is not None and self._steps % self.log_freq == 0:
                self._tensorboard().histograms(self._steps, self._names, gradients)
        update = applied(optimizer.apply_gradients, list(zip(gradients, weights)))
        if code == 0 or (code == 3 and self._missing_told):
            self._steps += 1
            update()
            return True
        names = (self._named(weights, index) if code != 3 else
                 tuple(weight_path_in(v, model) for v, g in zip(weights, gradients) if g is None))
        from gradcheck.forensics.site_lines import caller_location

        self._step_line = caller_location()  # the user's watch.step(...) line
        kind = TRIGGER_KINDS[code]
        step = self._steps
        self._steps += 1
        self._caught(Trigger(kind, _trigger_message(kind, names), names), step, None,
                     tuple(batch), loss_fn, structure)
        if code == 3:
            self._missing_told = True  # a missing gradient is told once
            if not self.stop:
                update()
        if self.stop:
            self.stopped = True
        return not self.stop

    def _step_in_graph(self, model: Any, optimizer: Any, tape: Any, loss: Any,
                       batch: Sequence[Any], loss_fn: Callable[..., Any] | None,
                       structure: str) -> Any:
        """watch.step traced in a tf.function: gated in-graph; the snapshot is written from a
        tf.py_function on the step that fires (not under XLA). Returns a boolean tensor; the
        loop reads watch.stopped."""
        from gradcheck.engine.variables import weight_path_in
        from gradcheck.training.gate import TRIGGER_KINDS, Gate, gated_graph_step, in_xla

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

        def report(kept: Any) -> None:
            found = gate.trigger()
            if found is None:
                return
            values, shard = kept
            code, step, first_bad = found
            names = self._named(weights, first_bad)
            kind = TRIGGER_KINDS[code]
            with _one_replica():
                self._caught(Trigger(kind, _trigger_message(kind, names, shard), names), step,
                             None, tuple(values), loss_fn, structure)
            if self.stop:
                self.stopped = True
            else:
                gate.resume()

        self._names = tuple(weight_path_in(v, self.model) for v in weights)
        return gated_graph_step(gate, model, optimizer, tape, loss, tuple(batch), report,
                                self._recorded if self.health else None)

    def _caught(self, trigger: Trigger, step: int, batch_index: int | None,
                batch: Sequence[Any], loss_fn: Callable[..., Any] | None, structure: str) -> None:
        """Publish the step's snapshot, then diagnose the live step and store the report; a
        trigger that repeats the previous step's (stop=False) is counted, not kept again."""
        if self._repeats(trigger, step) or self._on_another_worker(trigger, step):
            return
        # Epochs and batches as Keras shows them, from 1; steps from 0 (the optimizer's count).
        epoch = None if self._epoch is None else self._epoch + 1
        number = None if batch_index is None else batch_index + 1
        where = f"step {step}" + (f" (epoch {epoch}, batch {number})"
                                  if epoch is not None and number is not None else "")
        self._say(f"{where}: {trigger.message}; update not applied")
        health = self._health_arrays(step) if self._history else None
        capture = Capture(trigger, step, epoch, number, batch, loss_record(loss_fn), structure,
                          health)
        path: Path | None = None
        try:
            path = self._writer.write(self.model, capture)
        except Exception as exc:
            self._say(f"warning: could not write the snapshot of step {step}:"
                      f" {type(exc).__name__}: {exc}", finding=True)
        found = "not diagnosed (Watch(diagnose=False))"
        if self.diagnose:
            report, error = self._diagnosis(trigger, where, batch, loss_fn, structure, health)
            self.last_report = report
            found = step_finding(report, error, trigger.kind)
            if path is not None:
                from gradcheck.training.snapshot import write_report_files

                try:
                    write_report_files(path, report_files(report, error, health))
                except Exception as exc:
                    self._say(f"warning: could not store the diagnosis in {path}:"
                              f" {type(exc).__name__}: {exc}", finding=True)
        if self.tensorboard is not None and self.diagnose:
            self._tensorboard().diagnosis(step, f"step {step}: {trigger.message}\n\n{found}")
        kept = f"snapshot {path}: " if path is not None else ""
        self._say(f"{kept}{found}" + ("; training stopped with the weights before this step"
                                      if self.stop else ""), finding=True)

    def _on_another_worker(self, trigger: Trigger, step: int) -> bool:
        """Under a multi-worker strategy only the chief writes the snapshot and diagnoses:
        another worker says where it is, and stops (or goes on) with it at the same step."""
        worker = _worker(self.model)
        if worker is None or worker[0]:
            return False
        _, name, chief, workers = worker
        self._say(f"step {step}: {trigger.message}; update not applied on any of the"
                  f" {workers} workers; {chief} writes its snapshot under {self.directory}"
                  f" (on its machine) and diagnoses it; this is {name}", finding=True)
        return True

    def _repeats(self, trigger: Trigger, step: int) -> bool:
        last = self._last_trigger
        self._last_trigger = (trigger.kind, trigger.weights, step)
        if last is not None and last[:2] == (trigger.kind, trigger.weights) and (
                step == last[2] + 1):
            self._repeated += 1
            return True
        self._tell_repeated()
        return False

    def _tell_repeated(self) -> None:
        if self._repeated:
            self._say(f"the same trigger fired at {self._repeated} more step(s) in a row after"
                      " the last snapshot (counted, not kept)", finding=True)
        self._repeated = 0

    def _diagnosis(self, trigger: Trigger, where: str, batch: Sequence[Any],
                   loss_fn: Callable[..., Any] | None, structure: str,
                   health: dict[str, Any] | None) -> tuple[Any, str | None]:
        """The live step's report (or why there is none), the model left as it was."""
        from gradcheck.errors import GradcheckError
        from gradcheck.training.step import check_step, step_options

        started = time.monotonic()
        try:
            report = check_step(self.model, loss_fn, batch, structure,
                                step_options(trigger.kind), f"the training loss at {where}",
                                health, optimizer=self._optimizer,
                                without_gradient=trigger.weights, step_line=self._step_line)
        except GradcheckError as error:
            return None, error.message
        except Exception as exc:
            return None, f"the diagnosis failed: {type(exc).__name__}: {exc}"
        self._say(f"diagnosed in {time.monotonic() - started:.1f}s")
        return report, None

    def _named(self, weights: Sequence[Any], index: int) -> tuple[str, ...]:
        """The weight a trigger names (by its path in the model), if it names one."""
        from gradcheck.engine.variables import weight_path_in

        return (weight_path_in(weights[index], self.model),) if 0 <= index < len(weights) else ()

    def _health_arrays(self, failing: int) -> dict[str, Any]:
        import numpy as np

        return {"names": np.asarray(self._names, dtype=str),
                "steps": np.asarray([s for s, _, _ in self._history], np.int64),
                "norms": np.stack([n for _, n, _ in self._history]),
                "zeros": np.stack([z for _, _, z in self._history]),
                "failing_step": np.asarray(failing, np.int64)}


# What inspect.signature, editors and Jupyter's Shift-Tab show: __init__'s parameters, not the
# (*args, **kwargs) of __new__.
Watch.__signature__ = inspect.signature(Watch.__init__).replace(  # type: ignore[attr-defined]
    parameters=tuple(inspect.signature(Watch.__init__).parameters.values())[1:])


def _ignore(*args: Any, **kwargs: Any) -> None:
    return None


_CALLBACK_CLASSES: dict[str, type[Watch]] = {}


def _running_keras() -> str:
    """tf_keras when TensorFlow is told to use it (or it alone is imported), else Keras 3."""
    legacy = os.environ.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true", "yes")
    alone = "tf_keras" in sys.modules and "keras" not in sys.modules
    return "tf_keras" if legacy or alone else "keras"


def _as_callback(package: str) -> type[Watch]:
    """Watch as a subclass of `package`'s keras.callbacks.Callback (Watch alone without it)."""
    if package not in _CALLBACK_CLASSES:
        try:
            base = importlib.import_module(f"{package}.callbacks").Callback
        except ImportError:
            return Watch
        _CALLBACK_CLASSES[package] = type("Watch", (Watch, base), {
            "__module__": __name__, "__qualname__": "Watch", "_keras": package,
            "__doc__": Watch.__doc__})
    return _CALLBACK_CLASSES[package]


def _trigger_message(kind: str, weights: Sequence[str], shard: Any = None) -> str:
    named = f" for {', '.join(weights)}" if weights else ""
    message = {"non-finite-loss": "the loss is not finite",
               "non-finite-gradient": f"the gradient{named} is not finite",
               "no-gradient": f"no gradient{named} (Keras: 'Gradients do not exist for"
                              " variables')",
               }[kind]
    return message if shard is None else f"{message} {shard.words()}"


# Strategies whose steps Watch cannot gate, with why, in one line each.
_REFUSED = {
    "ParameterServerStrategy": "its workers apply their updates asynchronously, each to the"
    " parameter servers on its own, so no step can be withheld on every worker; use"
    " MultiWorkerMirroredStrategy (synchronous)",
    "TPUStrategy": "a TPU step cannot compile the gate's kept batch (variables whose shape"
    " changes) nor its call back into Python; reproduce on CPU or GPU under MirroredStrategy",
}


def _refuse_strategy() -> None:
    """A ValueError, in one line, under a strategy Watch does not support."""
    from gradcheck.engine.runtime import tensorflow

    tf = tensorflow()
    if not tf.distribute.has_strategy():
        return
    for kind in type(tf.distribute.get_strategy()).__mro__:
        name = kind.__name__.replace("V2", "").replace("V1", "")
        if name in _REFUSED:
            raise ValueError(f"gradcheck.Watch does not support {name}: {_REFUSED[name]}")


@contextlib.contextmanager
def _one_replica() -> Iterator[None]:
    """Under a tf.distribute strategy's scope (fit's callbacks run in it), the snapshot and the
    diagnosis run as its first local replica: a metric's update, a read of a variable, touch
    this worker's own copies, never a collective that the other workers would have to join."""
    from gradcheck.engine.runtime import tensorflow

    tf = tensorflow()
    if not tf.distribute.has_strategy() or not tf.distribute.in_cross_replica_context():
        yield
        return
    with tf.distribute.ReplicaContext(tf.distribute.get_strategy(), 0):
        yield


def _worker(model: Any) -> tuple[bool, str, str, int] | None:
    """Under a multi-worker strategy: (whether this is the chief, this worker's name, the
    chief's, how many workers), else None."""
    from gradcheck.engine.runtime import tensorflow

    tf = tensorflow()
    strategy = (tf.distribute.get_strategy() if tf.distribute.has_strategy()
                else getattr(model, "distribute_strategy", None))
    resolver = getattr(strategy, "cluster_resolver", None)
    spec = resolver.cluster_spec().as_dict() if resolver is not None else {}
    workers = sum(len(spec.get(kind, ())) for kind in ("chief", "worker"))
    if resolver is None or workers < 2:
        return None
    kind, index = resolver.task_type, int(resolver.task_id or 0)
    chief_name = "the chief" if "chief" in spec else "worker 0 (the chief)"
    chief = kind == "chief" or (kind == "worker" and index == 0 and "chief" not in spec)
    return chief, f"{kind} {index}", chief_name, workers


def _unpack(data: Any) -> tuple[Any, Any, Any]:
    if isinstance(data, (tuple, list)):
        items = list(data) + [None, None]
        return items[0], items[1], items[2]
    return data, None, None


