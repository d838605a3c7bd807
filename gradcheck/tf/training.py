"""A training step watched from inside TensorFlow: the update gated on a finite loss and
gradients (in-graph, so fit's tf.function, XLA and steps_per_execution keep running), the
failing batch kept, and what a snapshot needs from Keras (save, reload, the training loss)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.tf.arrays import as_array, dense_values
from gradcheck.tf.runtime import tensorflow
from gradcheck.tf.variables import weight_path

# What the gate records (its `code` variable).
NONE, NON_FINITE_LOSS, NON_FINITE_GRADIENT, NO_GRADIENT = 0, 1, 2, 3
TRIGGER_KINDS = {NON_FINITE_LOSS: "non-finite-loss", NON_FINITE_GRADIENT: "non-finite-gradient",
                 NO_GRADIENT: "no-gradient"}


def is_loss_scale_optimizer(optimizer: Any) -> bool:
    return type(optimizer).__name__ in ("LossScaleOptimizer", "LossScaleOptimizerV3")


def loss_scale(optimizer: Any) -> float | None:
    """The dynamic loss scale a LossScaleOptimizer holds now (None for another optimizer)."""
    if not is_loss_scale_optimizer(optimizer):
        return None
    for attribute in ("dynamic_scale", "loss_scale"):
        value = getattr(optimizer, attribute, None)
        if value is not None and not callable(value):
            return float(as_array(value))
    return None


class Gate:
    """The watched run's state, in variables the training graph writes and the callback reads:
    whether a step was stopped (`halted`), why, at which optimizer step, the first weight whose
    gradient was not finite, and the batch of that step."""

    def __init__(self, halts: bool = True) -> None:
        tf = tensorflow()
        # False under a LossScaleOptimizer, which skips non-finite steps itself: a non-finite
        # step is then recorded (with its batch) but never stopped.
        self.halts = halts
        with tf.init_scope():
            self.halted = tf.Variable(False, trainable=False, name="gradcheck_halted")
            self.code = tf.Variable(NONE, trainable=False, name="gradcheck_code")
            self.step = tf.Variable(tf.constant(-1, tf.int64), trainable=False,
                                    name="gradcheck_step")
            self.first_bad = tf.Variable(-1, trainable=False, name="gradcheck_first_bad")
            self.missing_reported = tf.Variable(False, trainable=False,
                                                name="gradcheck_missing_reported")
            # Steps run, skipped ones included (the optimizer's iterations do not count those).
            self.steps = tf.Variable(tf.constant(0, tf.int64), trainable=False,
                                     name="gradcheck_steps")
        self._stash: list[Any] = []
        self._structure: Any = None
        self.norms: Any = None  # per-weight gradient norms of the last step (health=True)
        self.zeros: Any = None

    def record_health(self, gradients: Sequence[Any]) -> None:
        """Each gradient's norm and fraction of exactly-zero elements, into variables."""
        tf = tensorflow()
        norms, zeros = health_tensors(gradients)
        if self.norms is None:
            with tf.init_scope():
                self.norms = tf.Variable(tf.zeros([len(gradients)]), trainable=False,
                                         name="gradcheck_norms")
                self.zeros = tf.Variable(tf.zeros([len(gradients)]), trainable=False,
                                         name="gradcheck_zeros")
        self.norms.assign(norms)
        self.zeros.assign(zeros)

    def verdict(self, loss: Any, gradients: Sequence[Any]) -> tuple[Any, Callable[[], Any]]:
        """The trigger code of one step, as a tensor, and how to find the first weight whose
        gradient is not finite (run only on the rare triggered path)."""
        tf = tensorflow()
        present = [(i, g) for i, g in enumerate(gradients) if g is not None]
        code = tf.constant(NONE)
        if len(present) < len(gradients):
            code = tf.where(self.missing_reported, NONE, NO_GRADIENT)
        if not present:
            return code, lambda: tf.constant(-1)
        bad = tf.logical_not(tf.stack([tf.reduce_all(tf.math.is_finite(dense_values(g)))
                                       for _, g in present]))
        code = tf.where(tf.reduce_any(bad), NON_FINITE_GRADIENT, code)
        if loss is not None:
            code = tf.where(tf.reduce_all(tf.math.is_finite(tf.cast(loss, tf.float32))), code,
                            NON_FINITE_LOSS)

        def first_bad() -> Any:
            index = tf.argmax(tf.cast(bad, tf.int32), output_type=tf.int32)
            return tf.where(tf.reduce_any(bad),
                            tf.gather(tf.constant([i for i, _ in present]), index), -1)

        return code, first_bad

    def guarded(self, code: Any, first_bad: Callable[[], Any], apply: Callable[[], Any]) -> Any:
        """Run `apply` (the optimizer's update) unless this step triggers or an earlier one of
        the same execution did; the first trigger is recorded. One tf.cond per step (as
        LossScaleOptimizer's); returns whether this step fired."""
        tf = tensorflow()
        fires = tf.logical_and(code > 0, tf.logical_not(self.halted))
        if not self.halts:
            return self._recorded_beside(code, first_bad, apply, fires)

        def record() -> Any:
            self.code.assign(tf.where(fires, code, self.code))
            self.step.assign(tf.where(fires, self.steps, self.step))
            self.first_bad.assign(tf.where(fires, first_bad(), self.first_bad))
            self.halted.assign(tf.logical_or(self.halted, fires))
            return tf.constant(True)

        def update() -> Any:
            apply()
            return tf.constant(False)

        done = tf.cond(tf.logical_or(code > 0, self.halted), record, update)
        return _after(done, fires)

    def _recorded_beside(self, code: Any, first_bad: Callable[[], Any], apply: Callable[[], Any],
                         fires: Any) -> Any:
        """Under a LossScaleOptimizer: its update always runs (it skips a non-finite step
        itself); the last non-finite step is recorded, and its batch kept, for the callback."""
        tf = tensorflow()
        apply()

        def record() -> Any:
            self.code.assign(code)
            self.step.assign(self.steps)
            self.first_bad.assign(first_bad())
            return tf.constant(True)

        done = tf.cond(fires, record, lambda: tf.constant(False))
        return _after(done, fires)

    def last_recorded(self) -> tuple[int, int] | None:
        """(code, step) of the last step recorded without stopping (a LossScaleOptimizer's)."""
        code = int(as_array(self.code))
        return (code, int(as_array(self.step))) if code else None

    def _stash_for(self, data: Any) -> None:
        tf = tensorflow()
        if self._structure is None:
            self._structure = data
            with tf.init_scope():
                self._stash = [tf.Variable(tf.zeros([0], leaf.dtype), shape=tf.TensorShape(None),
                                           trainable=False, name=f"gradcheck_batch_{i}")
                               for i, leaf in enumerate(tf.nest.flatten(data))]

    def _store(self, data: Any) -> Any:
        tf = tensorflow()
        for variable, leaf in zip(self._stash, tf.nest.flatten(data)):
            variable.assign(leaf)
        return tf.constant(True)

    def keep_batch(self, fired: Any, data: Any) -> None:
        """Store the step's batch when this step fired (outside an XLA cluster, whose
        variables' shapes cannot change)."""
        tf = tensorflow()
        self._stash_for(data)
        tf.cond(fired, lambda: self._store(data), lambda: tf.constant(False))

    def kept_batch(self) -> Any:
        """The stored batch as NumPy arrays, in the step's own structure."""
        tf = tensorflow()
        return tf.nest.pack_sequence_as(self._structure, [as_array(v) for v in self._stash])

    def trigger(self) -> tuple[int, int, int] | None:
        """(code, optimizer step, first non-finite weight) when a step was stopped."""
        if not bool(as_array(self.halted)):
            return None
        return int(as_array(self.code)), int(as_array(self.step)), int(as_array(self.first_bad))

    def reset(self, first_step: int) -> None:
        """A new fit: nothing recorded yet, steps counted on from `first_step`."""
        self.halted.assign(False)
        self.code.assign(NONE)
        self.step.assign(-1)
        self.first_bad.assign(-1)
        self.missing_reported.assign(False)
        self.steps.assign(first_step)

    def resume(self) -> None:
        """Let the following steps update again (stop=False); a missing gradient is told once."""
        if int(as_array(self.code)) == NO_GRADIENT:
            self.missing_reported.assign(True)
        self.halted.assign(False)
        self.code.assign(NONE)


@dataclass
class _Patched:
    owner: Any
    name: str
    had_own: bool
    previous: Any


class WatchedFit:
    """Keras fit watched: the model's train_step, compute_loss and its optimizer's
    apply_gradients are wrapped on the instances for the run, and put back after it."""

    def __init__(self, model: Any, health: bool = False) -> None:
        self.model = model
        self.health = health
        self.optimizer = model.optimizer
        self.gate = Gate(halts=not is_loss_scale_optimizer(self.optimizer))
        self._patches: list[_Patched] = []
        self._loss: list[Any] = []
        self._fired: list[Any] = []
        self.without_gradient: tuple[str, ...] = ()  # seen when fit's step was traced
        self._jit = _jit_compiled(model)
        self._watched_function: Any = None
        self._unwatched_function: Any = None

    def install(self, first_step: int) -> None:
        """Wrap the model for a fit; the watched step is traced once per model and optimizer,
        then reused by later fits."""
        tf = tensorflow()
        self.gate.reset(first_step)
        model, optimizer, gate = self.model, self.optimizer, self.gate
        compute_loss, apply_gradients = model.compute_loss, optimizer.apply_gradients
        train_step = model.train_step

        @functools.wraps(compute_loss)
        def watched_loss(*args: Any, **kwargs: Any) -> Any:
            loss = compute_loss(*args, **kwargs)
            self._loss.append(loss)
            return loss

        @functools.wraps(apply_gradients)
        def watched_apply(grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
            pairs = list(grads_and_vars)
            self.without_gradient = tuple(weight_path(v) for g, v in pairs if g is None)
            loss = self._loss[-1] if self._loss else None
            if _in_replica_of_a_strategy():
                self._fired.append(self._gated_across_replicas(pairs, loss, apply_gradients,
                                                               args, kwargs))
                return optimizer.iterations
            code, first_bad = gate.verdict(loss, [g for g, _ in pairs])
            if self.health:
                gate.record_health([g for g, _ in pairs])
            self._fired.append(gate.guarded(
                code, first_bad, lambda: apply_gradients(pairs, *args, **kwargs)))
            return optimizer.iterations

        def inner(data: Any) -> Any:
            self._loss.clear()
            self._fired.clear()
            logs = train_step(data)
            return logs, self._fired[-1] if self._fired else tf.constant(False)

        step = tf.function(inner, jit_compile=True) if self._jit else inner

        def watched_step(data: Any) -> Any:
            logs, fired = step(data)
            replicas = _in_replica_of_a_strategy()
            if replicas:  # the whole batch, not this replica's share
                context = tf.distribute.get_replica_context()
                data = tf.nest.map_structure(lambda t: context.all_gather(t, axis=0), data)
            gate.keep_batch(fired, data)  # outside XLA, whose variables cannot change shape
            if not replicas:  # counted once, across replicas, in _gated_across_replicas
                with tf.control_dependencies([fired]):
                    gate.steps.assign_add(1)
            return logs

        self._patch(model, "compute_loss", watched_loss)
        self._patch(optimizer, "apply_gradients", watched_apply)
        self._patch(model, "train_step", watched_step)
        if self._jit:
            self._patch(model, "jit_compile", False)
        self._unwatched_function = model.train_function  # fit made it before on_train_begin
        if self._watched_function is None:
            model.train_function = None
            model.make_train_function(force=True)
            self._watched_function = model.train_function
        model.train_function = self._watched_function

    def _gated_across_replicas(self, pairs: list[Any], loss: Any, apply_gradients: Any,
                               args: Any, kwargs: Any) -> Any:
        """The gate under a tf.distribute strategy: the optimizer's update synchronises the
        replicas, so the cond around it must run in the cross-replica context (as
        LossScaleOptimizer's does), on the worst verdict of any replica."""
        tf = tensorflow()
        gate = self.gate
        gradients = [g for g, _ in pairs]

        def code_of(gradients: Any, loss: Any) -> Any:
            return gate.verdict(loss, gradients)[0]

        def cross_replica(distribution: Any, gradients: Any, loss: Any) -> Any:
            codes = distribution.extended.call_for_each_replica(code_of, args=(gradients, loss))
            code = tf.reduce_max(tf.stack(distribution.experimental_local_results(codes)))

            def apply(gradients: Any) -> None:
                apply_gradients(list(zip(gradients, [v for _, v in pairs])), *args, **kwargs)

            fired = gate.guarded(code, lambda: tf.constant(-1), lambda: (
                distribution.extended.call_for_each_replica(apply, args=(gradients,))))
            with tf.control_dependencies([fired]):
                gate.steps.assign_add(1)
            return fired

        return tf.distribute.get_replica_context().merge_call(
            cross_replica, args=(gradients, tf.constant(0.0) if loss is None else loss))

    def _patch(self, owner: Any, name: str, value: Any) -> None:
        had_own = name in vars(owner)
        self._patches.append(_Patched(owner, name, had_own, vars(owner).get(name)))
        if name == "jit_compile":
            previous = owner.jit_compile
            self._patches[-1].previous = previous
            owner.jit_compile = value
            return
        setattr(owner, name, value)

    def uninstall(self) -> None:
        for patch in reversed(self._patches):
            if patch.name == "jit_compile":
                patch.owner.jit_compile = patch.previous
            elif patch.had_own:
                setattr(patch.owner, patch.name, patch.previous)
            else:
                with contextlib.suppress(AttributeError):
                    delattr(patch.owner, patch.name)
        self._patches.clear()
        self.model.train_function = self._unwatched_function


def _after(done: Any, fires: Any) -> Any:
    """`fires`, available only once the gate's cond has run: what reads the recorded trigger
    outside the graph (the callback's tf.py_function) must not race its assignments."""
    tf = tensorflow()
    with tf.control_dependencies([done]):
        return tf.identity(fires)


def _in_replica_of_a_strategy() -> bool:
    """Inside a replica of a strategy whose updates merge the replicas (MirroredStrategy)."""
    tf = tensorflow()
    return (tf.distribute.has_strategy() and not tf.distribute.in_cross_replica_context()
            and not tf.__internal__.distribute.strategy_supports_no_merge_call())


def _jit_compiled(model: Any) -> bool:
    value = getattr(model, "jit_compile", None)
    if value is None:
        value = getattr(model, "_jit_compile", None)
    return value is True


def custom_loop_verdict(loss: Any, gradients: Sequence[Any]) -> tuple[int, int]:
    """(trigger code, first non-finite gradient's index) of an eager custom-loop step."""
    if loss is not None and not np.all(np.isfinite(np.asarray(as_array(loss), np.float64))):
        return NON_FINITE_LOSS, -1
    for index, gradient in enumerate(gradients):
        if gradient is not None and not np.all(np.isfinite(
                np.asarray(as_array(dense_values(gradient)), np.float64))):
            return NON_FINITE_GRADIENT, index
    if any(g is None for g in gradients):
        return NO_GRADIENT, next(i for i, g in enumerate(gradients) if g is None)
    return NONE, -1


def health_tensors(gradients: Sequence[Any]) -> tuple[Any, Any]:
    """Per-weight gradient norms and fractions of exactly-zero elements, as two tensors."""
    tf = tensorflow()
    norms = tf.stack([tf.constant(0.0) if g is None else
                      tf.norm(tf.cast(dense_values(g), tf.float32)) for g in gradients])
    zeros = tf.stack([tf.constant(1.0) if g is None else tf.reduce_mean(
        tf.cast(tf.equal(dense_values(g), 0), tf.float32)) for g in gradients])
    return norms, zeros


def in_xla() -> bool:
    """Tracing inside an XLA-compiled function (tf.function(jit_compile=True))."""
    from tensorflow.python.framework import ops
    from tensorflow.python.ops import control_flow_util

    return bool(control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph()))


def in_graph() -> bool:
    return not tensorflow().executing_eagerly()


def gated_graph_step(gate: Gate, model: Any, optimizer: Any, tape: Any, loss: Any,
                     batch: Any, report: Callable[[Any], None],
                     health: Callable[[int, Any, Any], None] | None = None) -> Any:
    """A custom loop's step traced in a tf.function: the update gated as in fit, and on the
    step that fires, `report(batch)` called back eagerly (tf.py_function, in the rare branch
    only) to write the snapshot; `health(step, norms, zeros)` called back on every step.
    Returns whether training should go on, as a tensor."""
    tf = tensorflow()
    weights = model.trainable_variables
    gradients = tape.gradient(loss, weights)
    if health is not None:
        def eager_health(step: Any, norms: Any, zeros: Any) -> None:
            health(int(step), norms.numpy(), zeros.numpy())

        tf.py_function(eager_health, [gate.steps, *health_tensors(gradients)], Tout=[])
    code, first_bad = gate.verdict(loss, gradients)
    pairs = [(g, v) for g, v in zip(gradients, weights) if g is not None]
    fires = gate.guarded(code, first_bad, lambda: optimizer.apply_gradients(pairs))
    leaves = tf.nest.flatten(batch)

    def call_back() -> Any:
        def eager(*values: Any) -> None:
            report(tf.nest.pack_sequence_as(batch, list(values)))

        tf.py_function(eager, leaves, Tout=[])
        return tf.constant(True)

    reported = tf.cond(fires, call_back, lambda: tf.constant(False))
    with tf.control_dependencies([reported]):
        gate.steps.assign_add(1)
        return tf.logical_not(gate.halted.read_value())
