"""Keras fit watched: the model's train_step and compute_loss and its optimizer's
apply_gradients wrapped on the instances for a run, with the Gate of gradcheck.training.gate
around the update (across the replicas of a tf.distribute strategy too), and put back after."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gradcheck.engine.runtime import tensorflow
from gradcheck.engine.variables import weight_path_in
from gradcheck.training.gate import (
    Gate,
    applied,
    guarded_across_replicas,
    in_replica_of_a_strategy,
    is_loss_scale_optimizer,
    losses_recorded,
    step_optimizers,
    sums_gradients_itself,
)


@dataclass
class _Patched:
    owner: Any
    name: str
    had_own: bool
    previous: Any


class WatchedFit:
    """Keras fit watched: the model's train_step, compute_loss and its optimizer's
    apply_gradients are wrapped on the instances for the run, and put back after it."""

    def __init__(self, model: Any, health: bool = False, histograms: Any = None) -> None:
        self.model = model
        self.health = health
        self.histograms = histograms  # a keras_snapshot.StepHistograms, or None
        self._buckets: Any = None  # under XLA: the histograms' buckets the step computed
        self.optimizer = model.optimizer
        self.gate = Gate(halts=not is_loss_scale_optimizer(self.optimizer))
        self._patches: list[_Patched] = []
        self._loss: list[Any] = []
        self._fired: list[Any] = []
        self.without_gradient: tuple[str, ...] = ()  # seen when fit's step was traced
        self.saw_update = False  # an optimizer's apply_gradients was traced in the step
        self._jit = _jit_compiled(model)
        self._watched_function: Any = None
        self._unwatched_function: Any = None

    def install(self, first_step: int) -> None:
        """Wrap the model for a fit; the watched step is traced once per model and optimizer,
        then reused by later fits."""
        self.gate.reset(first_step)
        model = self.model
        compute_loss = model.compute_loss
        train_step = model.train_step
        self._patch(model, "compute_loss", self._watched_loss(compute_loss))
        for each in step_optimizers(model):  # a GAN's train_step updates with two
            self._patch(each, *self._watched_apply(each))
        self._patch(model, "train_step", self._watched_step(train_step))
        if self._jit:
            self._patch(model, "jit_compile", False)
        self._unwatched_function = model.train_function  # fit made it before on_train_begin
        if self._watched_function is None:
            model.train_function = None
            model.make_train_function(force=True)
            self._watched_function = model.train_function
        model.train_function = self._watched_function

    def _watched_loss(self, compute_loss: Any) -> Any:
        """compute_loss, keeping the step's loss for the gate's verdict."""

        @functools.wraps(compute_loss)
        def watched_loss(*args: Any, **kwargs: Any) -> Any:
            loss = compute_loss(*args, **kwargs)
            self._loss.append(loss)
            return loss

        return watched_loss

    def _watched_apply(self, optimizer: Any) -> tuple[str, Any]:
        """The optimizer's update behind the gate: Keras 3's `apply` (which apply_gradients and
        a train_step calling `optimizer.apply` both reach), tf-keras' apply_gradients."""
        if type(optimizer).__module__.partition(".")[0] == "keras":
            apply = optimizer.apply

            @functools.wraps(apply)
            def watched(grads: Any, trainable_variables: Any = None) -> Any:
                variables = list(trainable_variables if trainable_variables is not None
                                 else optimizer._trainable_variables)
                self._gated(optimizer, list(zip(grads, variables)), lambda pairs: apply(
                    [g for g, _ in pairs], [v for _, v in pairs]))

            return "apply", watched
        apply_gradients = optimizer.apply_gradients

        @functools.wraps(apply_gradients)
        def watched_apply(grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
            summed = None
            if sums_gradients_itself(optimizer) and not args and not kwargs:
                def summed(pairs: list[Any]) -> Any:
                    return apply_gradients(pairs, skip_gradients_aggregation=True)

            self._gated(optimizer, list(grads_and_vars),
                        lambda pairs: apply_gradients(pairs, *args, **kwargs), summed)
            return optimizer.iterations

        return "apply_gradients", watched_apply

    def _gated(self, optimizer: Any, pairs: list[Any], update: Callable[[list[Any]], Any],
               summed_update: Callable[[list[Any]], Any] | None = None) -> None:
        """`update(pairs)` run only on a step that does not trigger (a LossScaleOptimizer's
        always runs; the gate then only records)."""
        gate = self.gate
        self.saw_update = True
        build_optimizer(optimizer, [v for _, v in pairs])
        self.without_gradient = tuple(weight_path_in(v, self.model) for g, v in pairs
                                      if g is None)
        loss = self._loss[-1] if self._loss else None
        if in_replica_of_a_strategy():
            self._fired.append(guarded_across_replicas(gate, pairs, loss, update, gate.batch,
                                                       summed_update=summed_update))
            return
        code, first_bad = gate.verdict(loss, [g for g, _ in pairs])
        if self.health:
            gate.record_health([g for g, _ in pairs])
        if self.histograms is not None and self._jit:  # XLA compiles no summary op
            self._buckets = self.histograms.computed(gate.steps, pairs)  # written outside
        elif self.histograms is not None:
            self.histograms.in_step(gate.steps, pairs)
        self._fired.append(gate.guarded(code, first_bad, applied(update, pairs)))

    def _watched_step(self, train_step: Any) -> Any:
        """train_step (XLA-compiled when the model is), then, outside XLA, the batch kept when
        the step fired and the steps counted."""
        tf = tensorflow()
        gate = self.gate

        def inner(data: Any) -> Any:
            self._loss.clear()
            self._fired.clear()
            self._buckets = None
            with losses_recorded(self._loss):
                logs = train_step(data)
            fired = (self._fired[0] if len(self._fired) == 1 else
                     tf.reduce_any(tf.stack(self._fired)) if self._fired else tf.constant(False))
            return logs, fired, [] if self._buckets is None else [self._buckets]

        step = tf.function(inner, jit_compile=True) if self._jit else inner

        def watched_step(data: Any) -> Any:
            replicas = in_replica_of_a_strategy()
            # Kept where the trigger is recorded (under a strategy, every replica's shard,
            # gathered on the step that fires), unless XLA (whose variables cannot change
            # shape) runs that branch.
            inside = not self._jit
            if inside and not replicas:
                gate.stash_for(data)
            gate.batch = data if inside else None
            try:
                logs, fired, buckets = step(data)
            finally:
                gate.batch = None
            if not inside:
                gate.keep_batch(fired, data)
            if buckets:  # the histograms XLA bucketed, written here
                self.histograms.written(gate.steps, buckets[0])
            if not replicas:  # counted once, across replicas, in guarded_across_replicas
                with tf.control_dependencies([fired]):
                    gate.steps.assign_add(1)
            return logs

        return watched_step

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


def build_optimizer(optimizer: Any, variables: list[Any]) -> None:
    """Create an optimizer's slots now (inside the gated update, a tf.cond, they cannot be)."""
    build = getattr(optimizer, "build", None)
    if callable(build) and not getattr(optimizer, "built", True) and variables:
        with contextlib.suppress(Exception):  # tf-keras builds in apply_gradients anyway
            build(variables)


def _jit_compiled(model: Any) -> bool:
    value = getattr(model, "jit_compile", None)
    if value is None:
        value = getattr(model, "_jit_compile", None)
    return value is True
