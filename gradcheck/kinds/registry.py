"""The kinds checked after the sweep over f's inputs, one line each, in the order their
findings are reported: its Kind, its check, the option it needs besides being wanted, and what
it asks of f before anything runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gradcheck.checks.context import CheckContext, Findings
from gradcheck.kinds.accumulation.check import check_accumulation
from gradcheck.kinds.compiled.check import check_compiled
from gradcheck.kinds.hessian.check import check_hessian, require_scalar
from gradcheck.kinds.jvp.check import check_jvp
from gradcheck.kinds.precision.check import check_precision
from gradcheck.kinds.second_order.check import check_second_order
from gradcheck.kinds.strategy.check import check_strategy
from gradcheck.options import CheckOptions
from gradcheck.report import CheckResult, Kind


def _always(options: CheckOptions) -> bool:
    return True


def _anything(ctx: CheckContext) -> None:
    return None


@dataclass(frozen=True)
class Registered:
    """A kind that runs when wanted (ctx.wants) and its option `runs` says so; `validate`
    raises a usage error (InputError) for an f it cannot check, before the sweep starts."""

    kind: Kind
    check: Callable[[CheckContext], Findings | Sequence[CheckResult]]
    runs: Callable[[CheckOptions], bool] = _always
    validate: Callable[[CheckContext], None] = _anything


KINDS = (
    Registered(Kind.JVP, check_jvp),
    Registered(Kind.COMPILED, check_compiled, lambda options: options.compiled),
    Registered(Kind.SECOND_ORDER, check_second_order, lambda options: options.order >= 2),
    Registered(Kind.HESSIAN, check_hessian, validate=require_scalar),
    Registered(Kind.PRECISION, check_precision),
    Registered(Kind.STRATEGY, check_strategy),
    Registered(Kind.ACCUMULATION, check_accumulation),
)


def _running(ctx: CheckContext) -> list[Registered]:
    """The registered kinds that ctx wants and whose option says so, in the registry's order."""
    return [entry for entry in KINDS if ctx.wants(entry.kind) and entry.runs(ctx.options)]


def validate_registered(ctx: CheckContext) -> None:
    """Every kind that will run may refuse f first (a usage error, before the sweep)."""
    for registered in _running(ctx):
        registered.validate(ctx)


def check_registered(ctx: CheckContext) -> Findings:
    """What every registered kind that ctx wants finds, in the registry's order."""
    found = Findings()
    for registered in _running(ctx):
        found.extend(registered.check(ctx))
    return found


# Kinds whose check needs more than f at its arguments, one line each: where they run.
ELSEWHERE = {
    Kind.AGAINST: "gradcheck.pipeline: f against another TARGET, loaded beside it",
    Kind.HEALTH: "gradcheck.training.step: the weights' gradients gradcheck.Watch recorded",
    Kind.JACOBIAN: "gradcheck.checks.run: the sweep over f's inputs, first, whose judged inputs"
                   " the vjp kind and --explain read",
    Kind.VJP: "gradcheck.checks.run: against the Jacobian blocks the sweep judged",
    Kind.NONDETERMINISM: "gradcheck.checks.run: before every other, since f changing between"
                         " calls at the same point leaves no finite difference to judge",
}
