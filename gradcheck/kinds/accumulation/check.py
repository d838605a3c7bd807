"""The accumulation check: f's gradient accumulated over K micro-batches of its batch, as a
training loop or Keras' gradient_accumulation_steps applies it, against the whole batch's."""

from __future__ import annotations

from gradcheck.checks.context import CheckContext
from gradcheck.kinds.accumulation.evidence import AccumulatedGradient
from gradcheck.kinds.accumulation.judging import judge_accumulation
from gradcheck.kinds.accumulation.tf import micro_batch_gradients
from gradcheck.kinds.strategy.check import has_batch_norm, split_batch
from gradcheck.report import CheckResult, Kind, Status


def check_accumulation(ctx: CheckContext) -> list[CheckResult]:
    parts = ctx.options.accumulate
    if parts is None:
        return []
    program = ctx.program
    split_batch(program, parts, f"--accumulate {parts}", "micro-batches",
                "a loop over micro-batches would end with a smaller one")
    if not any(s.differentiable and not s.argument for s in program.slots):
        return []
    whole, gradients = micro_batch_gradients(program, ctx.diff_outputs, parts)
    state, error, ratio = judge_accumulation(whole, gradients, ctx.evaluation.dtype)
    return [CheckResult(Kind.ACCUMULATION, Status.PASS if state == "same" else Status.FAIL,
                        max_rel_err=error, evidence=AccumulatedGradient(
                            state, parts, error, ratio, has_batch_norm(program)))]
