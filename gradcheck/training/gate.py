"""A training step watched from inside TensorFlow: the Gate that applies the update only on a
finite loss and gradients (in-graph, so fit's tf.function, XLA and steps_per_execution keep
running) and keeps the failing batch, a custom loop's step gated likewise, and the loss scale
a LossScaleOptimizer holds. Keras fit's step is wrapped around the Gate in
training/watched_fit.py."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.engine.arrays import as_array, dense_values
from gradcheck.engine.runtime import tensorflow

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


@dataclass(frozen=True)
class ReplicaShard:
    """Which replica of a tf.distribute strategy fired, and its share of the global batch."""

    replica: int  # its id in the sync group (every worker's replicas, in order)
    replicas: int
    rows: int  # the rows of its shard
    batch_rows: int  # the rows of the global batch

    def words(self) -> str:
        rows = f"{self.batch_rows} row{'s' if self.batch_rows != 1 else ''}"
        share = (f"its shard holds {self.rows} of the batch's {rows}" if self.rows else
                 f"its shard of the batch's {rows} is empty")
        why = ("; a per-replica mean over 0 rows is 0/0: average with"
               " tf.nn.compute_average_loss(per_example_loss, global_batch_size=...) or batch"
               " with drop_remainder=True" if not self.rows else "")
        return f"on replica {self.replica} of {self.replicas} ({share}{why})"


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
            # Under a tf.distribute strategy: the replica that fired (the first whose loss or
            # gradient was not finite, in the order of replica ids across every worker) and the
            # rows of each replica's shard, whose concatenation is the kept batch.
            self.replica = tf.Variable(-1, trainable=False, name="gradcheck_replica")
            self.rows = tf.Variable(tf.zeros([0], tf.int32), shape=tf.TensorShape([None]),
                                    trainable=False, name="gradcheck_rows")
        self._stash: list[Any] = []
        self._structure: Any = None
        # Under a strategy's fit: each local replica keeps its own shard in its copy of the
        # stash, gathered from every replica by the callback (gathered()), not in the step.
        self.shards_local = False
        # The step's batch, when the branch that records a trigger also keeps it (no cond of
        # its own on every step); None where that branch cannot (XLA, a strategy's replicas).
        self.batch: Any = None
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
        # As few ops as a LossScaleOptimizer's check (each costs microseconds on a 1 ms step):
        # one finiteness flag per gradient, which weight is first found only when one fails.
        finite = tf.stack([tf.reduce_all(tf.math.is_finite(dense_values(g)))
                           for _, g in present])
        code = tf.where(tf.reduce_all(finite), code, NON_FINITE_GRADIENT)
        if loss is not None:
            value = loss if loss.dtype in (tf.float32, tf.float64) else tf.cast(loss, tf.float32)
            code = tf.where(tf.reduce_all(tf.math.is_finite(value)), code, NON_FINITE_LOSS)

        def first_bad() -> Any:
            index = tf.argmin(tf.cast(finite, tf.int32), output_type=tf.int32)
            return tf.where(tf.reduce_all(finite), -1,
                            tf.gather(tf.constant([i for i, _ in present]), index))

        return code, first_bad

    def guarded(self, code: Any, first_bad: Callable[[], Any], apply: Callable[[], Any],
                keep: Callable[[], Any] | None = None) -> Any:
        """Run `apply` (the optimizer's update) unless this step triggers or an earlier one of
        the same execution did; the first trigger is recorded (and `keep()` run: what a
        strategy's step keeps of its replicas). One tf.cond per step (as
        LossScaleOptimizer's); returns whether this step fired."""
        tf = tensorflow()
        if not self.halts:
            fires = tf.logical_and(code > 0, tf.logical_not(self.halted))
            return self._recorded_beside(code, first_bad, apply, fires, keep)
        halted = self.halted.read_value()
        triggers = code > 0

        def record() -> Any:  # the rare branch: everything but the predicate is computed here
            fires = tf.logical_and(triggers, tf.logical_not(halted))
            self.code.assign(tf.where(fires, code, self.code))
            self.step.assign(tf.where(fires, self.steps, self.step))
            self.first_bad.assign(tf.where(fires, first_bad(), self.first_bad))
            self.halted.assign(tf.logical_or(halted, fires))
            if self.batch is not None:
                tf.cond(fires, lambda: self._store(self.batch), lambda: tf.constant(False))
            if keep is not None:
                tf.cond(fires, keep, lambda: tf.constant(False))
            return fires

        def update() -> Any:
            apply()
            return tf.constant(False)

        # Whether this step fired, once the cond (and its assignments) ran.
        return tf.cond(tf.logical_or(triggers, halted), record, update)

    def _recorded_beside(self, code: Any, first_bad: Callable[[], Any], apply: Callable[[], Any],
                         fires: Any, keep: Callable[[], Any] | None = None) -> Any:
        """Under a LossScaleOptimizer: its update always runs (it skips a non-finite step
        itself); the last non-finite step is recorded, and its batch kept, for the callback;
        a non-finite loss halts."""
        tf = tensorflow()
        apply()

        def record() -> Any:
            self.code.assign(code)
            self.step.assign(self.steps)
            self.first_bad.assign(first_bad())
            # A non-finite loss is the forward pass's: no loss scale repairs it. It stops.
            self.halted.assign(tf.equal(code, NON_FINITE_LOSS))
            if self.batch is not None:
                self._store(self.batch)
            if keep is not None:
                keep()
            return tf.constant(True)

        done = tf.cond(fires, record, lambda: tf.constant(False))
        return _after(done, fires)

    def last_recorded(self) -> tuple[int, int] | None:
        """(code, step) of the last step recorded without stopping (a LossScaleOptimizer's)."""
        code = int(as_array(self.code))
        return (code, int(as_array(self.step))) if code else None

    def stash_for(self, data: Any) -> None:
        """The variables that keep a batch of this structure."""
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
        self.stash_for(data)
        tf.cond(fired, lambda: self._store(data), lambda: tf.constant(False))

    def kept_batch(self) -> Any:
        """The stored batch as NumPy arrays, in the step's own structure."""
        tf = tensorflow()
        values = self._gathered() if self.shards_local else [as_array(v) for v in self._stash]
        return tf.nest.pack_sequence_as(self._structure, values)

    def _gathered(self) -> list[Any]:
        """Every replica's kept shard, concatenated in the order of replica ids: one
        all-gather per leaf that every worker's callback enters together, on the step that
        fired (never in the training step)."""
        tf = tensorflow()
        stash = self._stash
        strategy = stash[0].distribute_strategy

        @tf.function
        def gather() -> Any:
            local = strategy.run(lambda: [tf.identity(v) for v in stash])
            return [strategy.gather(shard, axis=0) for shard in local]

        with strategy.scope():
            return [as_array(v) for v in gather()]

    def kept_replica(self) -> tuple[Any, ReplicaShard | None]:
        """The stored batch, and under a strategy, the shard of the replica that fired (the
        batch the diagnosis takes) with where it sits among the replicas."""
        batch = self.kept_batch()
        replica = int(as_array(self.replica))
        if replica < 0:
            return batch, None
        rows = [int(r) for r in as_array(self.rows)]
        shard = ReplicaShard(replica, len(rows), rows[replica], sum(rows))
        start = sum(rows[:replica])
        tf = tensorflow()
        return tf.nest.map_structure(lambda a: a[start:start + shard.rows], batch), shard

    def trigger(self) -> tuple[int, int, int] | None:
        """(code, optimizer step, first non-finite weight) when a step was stopped."""
        if not bool(as_array(self.halted)):
            return None
        return int(as_array(self.code)), int(as_array(self.step)), int(as_array(self.first_bad))

    def reset(self, first_step: int) -> None:
        """A new fit: nothing recorded yet, steps counted on from `first_step`."""
        self.replica.assign(-1)
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
        self.replica.assign(-1)


def _assign(variable: Any, value: Any) -> Any:
    return variable.assign(value)


def _after(done: Any, fires: Any) -> Any:
    """`fires`, available only once the gate's cond has run: what reads the recorded trigger
    outside the graph (the callback's tf.py_function) must not race its assignments."""
    tf = tensorflow()
    with tf.control_dependencies([done]):
        return tf.identity(fires)


def in_replica_of_a_strategy() -> bool:
    """Inside a replica of a strategy whose updates merge the replicas (MirroredStrategy,
    MultiWorkerMirroredStrategy)."""
    tf = tensorflow()
    return (tf.distribute.has_strategy() and not tf.distribute.in_cross_replica_context()
            and not tf.__internal__.distribute.strategy_supports_no_merge_call())


def guarded_across_replicas(gate: Gate, pairs: Sequence[tuple[Any, Any]], loss: Any,
                            update: Callable[[list[Any]], Any], batch: Any,
                            report: Callable[[], None] | None = None,
                            summed_update: Callable[[list[Any]], Any] | None = None) -> Any:
    """The gate in a replica of a strategy. Each replica's verdict (its trigger, its first
    non-finite weight, its shard's rows) is summed into one table across the replicas, so every
    replica of every worker sees every verdict and takes the same branch at the same step; the
    cond around the update then runs in the cross-replica context, as LossScaleOptimizer's
    does. With `summed_update` (an optimizer that takes gradients already summed: tf-keras'),
    the table rides in the gradients' own batch all-reduce, the one the optimizer would make
    (no collective of its own, a round trip between workers per step), and `summed_update`
    applies the sums; otherwise the table is all-reduced alone and `update` sums and applies
    the gradients. On the step that fires, and only then, each replica keeps its own shard:
    without `report` (fit), in its own copy of the stash, for the callback to gather
    (Gate.kept_batch), so that the step holds no collective but the all-reduce; with it (a
    custom loop, whose step is its only place to write the snapshot), every replica's shard is
    gathered in the step (a collective every worker enters together) and `report()` is called
    back once per worker (tf.py_function). Returns whether this step fired."""
    tf = tensorflow()
    context = tf.distribute.get_replica_context()
    gradients = [g for g, _ in pairs]
    weights = [v for _, v in pairs]
    code, first_bad = gate.verdict(loss, gradients)
    leaves = tf.nest.flatten(batch) if batch is not None else []
    if leaves:
        gate.stash_for(batch)
        gate.shards_local = report is None
    rows = (tf.shape(leaves[0])[0] if leaves and leaves[0].shape.rank
            else tf.constant(-1))
    row = tf.cast(tf.stack([code, first_bad(), rows]), tf.float32)
    slot = tf.one_hot(context.replica_id_in_sync_group, context.num_replicas_in_sync)
    table = slot[:, None] * row[None, :]
    packed = summed_update is not None and any(g is not None for g in gradients)
    if not packed:
        table = context.all_reduce(tf.distribute.ReduceOp.SUM, table)

    def cross_replica(distribution: Any, gradients: Any, table: Any, leaves: Any) -> Any:
        sum_op = tf.distribute.ReduceOp.SUM
        if packed:  # as tf-keras' all_reduce_sum_gradients does, with the table last
            present = [(g, v) for g, v in zip(gradients, weights) if g is not None]
            summed = distribution.extended.batch_reduce_to(
                sum_op, [*present, (table, present[0][1])])
            table, sums = summed[-1], iter(summed[:-1])
            gradients = [None if g is None else next(sums) for g in gradients]
        table = distribution.experimental_local_results(table)[0]
        codes = tf.cast(table[:, 0], tf.int32)
        replica = tf.argmax(tf.cast(codes > 0, tf.int32), output_type=tf.int32)

        def keep() -> Any:
            gate.replica.assign(replica)
            gate.rows.assign(tf.cast(table[:, 2], tf.int32))
            if report is None:  # each local replica's own shard; the callback gathers them
                for variable, leaf in zip(gate._stash, leaves):
                    distribution.extended.update(variable, _assign, args=(leaf,), group=False)
                return tf.constant(True)
            for variable, leaf in zip(gate._stash, leaves):
                variable.assign(distribution.gather(leaf, axis=0))
            with tf.control_dependencies([gate.replica.read_value(),
                                          *[v.read_value() for v in gate._stash]]):
                tf.py_function(report, [], Tout=[])
            return tf.constant(True)

        def apply(gradients: Any) -> None:
            chosen = summed_update if packed and summed_update is not None else update
            chosen([(g, v) for g, v in zip(gradients, weights) if g is not None])

        fired = gate.guarded(
            tf.reduce_max(codes), lambda: tf.cast(tf.gather(table[:, 1], replica), tf.int32),
            lambda: distribution.extended.call_for_each_replica(apply, args=(gradients,)),
            keep)
        with tf.control_dependencies([fired]):
            gate.steps.assign_add(1)
        return tf.identity(fired)

    return context.merge_call(cross_replica, args=(gradients, table, leaves))


def sums_gradients_itself(optimizer: Any) -> bool:
    """A tf-keras optimizer (not legacy, not a LossScaleOptimizer), whose apply_gradients
    takes gradients already summed across replicas (skip_gradients_aggregation=True) and
    otherwise sums them with one batch all-reduce, as guarded_across_replicas does."""
    module = type(optimizer).__module__
    return (module.startswith("tf_keras.src.optimizers.") and ".legacy" not in module
            and callable(getattr(optimizer, "aggregate_gradients", None))
            and not is_loss_scale_optimizer(optimizer))


def applied(update: Callable[[list[Any]], Any], pairs: Sequence[tuple[Any, Any]]
            ) -> Callable[[], Any]:
    """The optimizer's update of the weights that have a gradient; none when no weight has one
    (Keras raises "No gradients provided for any variable": Watch reports it instead)."""
    present = [(g, v) for g, v in pairs if g is not None]
    if not present:
        return lambda: tensorflow().no_op()
    return lambda: update(present)


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
    step that fires, `report((batch, replica shard or None))` called back eagerly
    (tf.py_function, in the rare branch only) to write the snapshot; `health(step, norms,
    zeros)` called back on every step.
    Returns whether training should go on, as a tensor."""
    tf = tensorflow()
    weights = model.trainable_variables
    gradients = tape.gradient(loss, weights)
    if health is not None:
        def eager_health(step: Any, norms: Any, zeros: Any) -> None:
            health(int(step), norms.numpy(), zeros.numpy())

        tf.py_function(eager_health, [gate.steps, *health_tensors(gradients)], Tout=[])
    pairs = [(g, v) for g, v in zip(gradients, weights) if g is not None]
    if in_replica_of_a_strategy():  # every replica's verdict, one callback per worker
        def call_back_once() -> None:
            report(gate.kept_replica())

        def summed(pairs: list[Any]) -> Any:
            return optimizer.apply_gradients(pairs, skip_gradients_aggregation=True)

        fires = guarded_across_replicas(
            gate, list(zip(gradients, weights)), loss, optimizer.apply_gradients, batch,
            call_back_once, summed if sums_gradients_itself(optimizer) else None)
        with tf.control_dependencies([fires]):
            return tf.logical_not(gate.halted.read_value())
    code, first_bad = gate.verdict(loss, gradients)
    fires = gate.guarded(code, first_bad, applied(optimizer.apply_gradients, pairs))
    leaves = tf.nest.flatten(batch)

    def call_back() -> Any:
        def eager(*values: Any) -> None:
            report((tf.nest.pack_sequence_as(batch, list(values)), None))

        tf.py_function(eager, leaves, Tout=[])
        return tf.constant(True)

    reported = tf.cond(fires, call_back, lambda: tf.constant(False))
    with tf.control_dependencies([reported]):
        gate.steps.assign_add(1)
        return tf.logical_not(gate.halted.read_value())


@contextlib.contextmanager
def losses_recorded(losses: list[Any]) -> Iterator[None]:
    """While fit's step is traced, the scalar each tape.gradient differentiates is recorded:
    a custom train_step's loss, which it never hands to compute_loss (a GAN's d_loss)."""
    tf = tensorflow()
    original = tf.GradientTape.gradient

    def recorded(tape: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
        if tf.is_tensor(target) and target.shape.rank == 0:
            losses.append(target)
        return original(tape, target, *args, **kwargs)

    tf.GradientTape.gradient = recorded
    try:
        yield
    finally:
        tf.GradientTape.gradient = original


def step_optimizers(model: Any) -> list[Any]:
    """The optimizers a model's train_step may update with: model.optimizer and every other
    one it holds as an attribute (a GAN's d_optimizer and g_optimizer)."""
    found = [model.optimizer] if model.optimizer is not None else []
    for value in list(vars(model).values()):
        if (callable(getattr(value, "apply_gradients", None)) and hasattr(value, "iterations")
                and not any(value is known for known in found)):
            found.append(value)
    return found


@contextlib.contextmanager
def updates_withheld(model: Any) -> Iterator[None]:
    """While the body runs, no optimizer of the model's step updates a weight."""
    optimizers = step_optimizers(model)
    patched = [(o, name, name in vars(o)) for o in optimizers
               for name in ("apply_gradients", "apply") if callable(getattr(o, name, None))]
    saved = [(o, name, vars(o).get(name)) for o, name, _ in patched]
    for optimizer, name, _ in patched:
        setattr(optimizer, name, lambda *args, **kwargs: None)
    try:
        yield
    finally:
        for (optimizer, name, had), (_, _, previous) in zip(patched, saved):
            if had:
                setattr(optimizer, name, previous)
            else:
                delattr(optimizer, name)


def train_step_loss(model: Any, x: Any, y: Any = None, sample_weight: Any = None) -> Any:
    """The loss a model's own train_step differentiates at a batch (its first tape target:
    a GAN's discriminator loss), the step run with its updates withheld."""
    tf = tensorflow()
    data = (x,) if y is None else (x, y) if sample_weight is None else (x, y, sample_weight)
    losses: list[Any] = []
    with losses_recorded(losses), updates_withheld(model):
        type(model).train_step(model, data if len(data) > 1 else x)  # not Watch's wrapper
    if not losses:
        raise ValueError("the model's train_step differentiates no scalar loss")
    return tf.identity(losses[0])
