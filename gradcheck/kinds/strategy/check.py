"""The strategy check: f's batch split over MirroredStrategy replicas, the summed gradient the
optimizer would apply against the single-device gradient of the whole batch."""

from __future__ import annotations

from gradcheck.checks.context import CheckContext
from gradcheck.engine.program import Program
from gradcheck.errors import InputError
from gradcheck.kinds.strategy.evidence import ReplicaGradient
from gradcheck.kinds.strategy.judging import judge_replicas
from gradcheck.kinds.strategy.multiworker import check_worker_count, loss_gradients, multiworker_sum
from gradcheck.kinds.strategy.tf import (
    ReplicatedGradients,
    as_numpy,
    batch_slots,
    model_losses,
    provide_replicas,
    replicated_gradients,
)
from gradcheck.report import CheckResult, Kind, Status


def parse_strategy(spec: str) -> int:
    """mirrored:N or multiworker:N as N (options.py validates the spelling)."""
    return int(spec.partition(":")[2])


def _multiworker(program: Program, replicas: int, timeout: float | None,
                 scratch: str | None) -> ReplicatedGradients:
    """The gradients of f's batch split over REPLICAS local MultiWorkerMirroredStrategy
    workers, beside the single-device gradients for the same variables."""
    args, kwargs = program.arguments()
    program.announce(f"the MultiWorkerMirroredStrategy step over {replicas} worker processes")
    variables, whole = loss_gradients(program.function, args, kwargs)
    summed = multiworker_sum(program.function, args, kwargs, batch_slots(program), replicas,
                             timeout or 300.0, scratch)
    return ReplicatedGradients(tuple(v.name for v in variables), as_numpy(whole),
                               tuple(summed), model_losses(program, variables))


def split_batch(program: Program, parts: int, flag: str, what: str, remainder: str) -> None:
    """An InputError unless f's batch arguments share a first dimension that PARTS divide."""
    sizes = {program.slots[i].shape[0] for i in batch_slots(program)}
    if len(sizes) != 1:
        raise InputError(f"{flag}: f's batch arguments must share their first"
                         f" dimension (found sizes {sorted(sizes) or 'none'})")
    size = sizes.pop()
    if size < parts:
        raise InputError(f"{flag}: a batch of {size} cannot feed {parts} {what}")
    if size % parts:
        raise InputError(f"{flag}: a batch of {size} does not split evenly over {parts} {what};"
                         f" {remainder}: check with a batch of a multiple of {parts}")


def has_batch_norm(program: Program) -> bool:
    """Whether a Keras model among f's arguments has a BatchNormalization layer."""
    return any(type(layer).__name__ == "BatchNormalization"
               for slot in program.slots if callable(slot.value)
               for layer in getattr(slot.value, "_flatten_layers", lambda: [])())


def check_strategy(ctx: CheckContext) -> list[CheckResult]:
    spec = ctx.options.strategy
    if spec is None:
        return []
    replicas = parse_strategy(spec)
    if spec.startswith("multiworker"):
        check_worker_count(replicas)
    program = ctx.program
    split_batch(program, replicas, f"--strategy {spec}", "replicas",
                "tf.distribute gives the last replicas smaller shares of a final partial batch")
    if not any(s.differentiable and not s.argument for s in program.slots):
        return []
    if spec.startswith("multiworker"):
        found = _multiworker(program, replicas, ctx.options.timeout, ctx.settings.scratch)
    else:
        program.announce(f"the MirroredStrategy step over {replicas} replicas")
        found = replicated_gradients(program, ctx.diff_outputs, provide_replicas(replicas))
    state, error, ratio = judge_replicas(found.whole, found.summed, replicas,
                                         ctx.evaluation.dtype, found.regularisation)
    batch_norm = has_batch_norm(program)
    return [CheckResult(Kind.STRATEGY, Status.PASS if state == "same" else Status.FAIL,
                        max_rel_err=error, evidence=ReplicaGradient(
                            state, replicas, error, ratio, batch_norm,
                            spec.startswith("multiworker")))]
