"""The kinds checked after the sweep over f's inputs, one line each, in the order their
findings are reported: its Kind, its check, and the option it needs besides being wanted."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gradcheck.checks.compiled import check_compiled
from gradcheck.checks.context import CheckContext, Findings
from gradcheck.checks.hessian import check_hessian
from gradcheck.checks.second_order import check_second_order
from gradcheck.kinds.accumulation.check import check_accumulation
from gradcheck.kinds.jvp.check import check_jvp
from gradcheck.kinds.precision.check import check_precision
from gradcheck.kinds.strategy.check import check_strategy
from gradcheck.options import CheckOptions
from gradcheck.report import CheckResult, Kind


def _always(options: CheckOptions) -> bool:
    return True


@dataclass(frozen=True)
class Registered:
    """A kind that runs when wanted (ctx.wants) and its option `runs` says so."""

    kind: Kind
    check: Callable[[CheckContext], Findings | Sequence[CheckResult]]
    runs: Callable[[CheckOptions], bool] = _always


KINDS = (
    Registered(Kind.JVP, check_jvp),
    Registered(Kind.COMPILED, check_compiled, lambda options: options.compiled),
    Registered(Kind.SECOND_ORDER, check_second_order, lambda options: options.order >= 2),
    Registered(Kind.HESSIAN, check_hessian),
    Registered(Kind.PRECISION, check_precision),
    Registered(Kind.STRATEGY, check_strategy),
    Registered(Kind.ACCUMULATION, check_accumulation),
)


def run_registered(ctx: CheckContext) -> Findings:
    """What every registered kind that ctx wants finds, in the registry's order."""
    found = Findings()
    for registered in KINDS:
        if ctx.wants(registered.kind) and registered.runs(ctx.options):
            found.extend(registered.check(ctx))
    return found


# Kinds whose check needs more than f at its arguments, one line each: where they run.
ELSEWHERE = {
    Kind.AGAINST: "gradcheck.pipeline: f against another TARGET, loaded beside it",
    Kind.HEALTH: "gradcheck.training.step: the weights' gradients gradcheck.Watch recorded",
}
