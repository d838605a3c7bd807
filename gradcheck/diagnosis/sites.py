"""Each observed tf.custom_gradient checked on its own, at the arguments it was called with."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from gradcheck.checks.run import run_checks
from gradcheck.diagnosis.custom_gradients import translate, variable_results, violation_results
from gradcheck.errors import GradcheckError
from gradcheck.load.inputs import Arguments, NamedArgument, name_arguments
from gradcheck.numerics.mistakes import Mistake, shape_mistake
from gradcheck.options import CheckOptions
from gradcheck.report import CheckResult, Kind, Report, Status
from gradcheck.tf.instrument import Observer, Site
from gradcheck.tf.program import prepare
from gradcheck.tf.sites import eager_call, forward_jacobian, site_vjp

SITE_KINDS = frozenset({Kind.JACOBIAN, Kind.GRAD_SHAPE, Kind.CONNECTED, Kind.CUSTOM_GRADIENT,
                        Kind.FAST, Kind.SECOND_ORDER})


def _site_arguments(site: Site) -> list[NamedArgument]:
    args, kwargs = site.calls[0]
    return name_arguments(site.forward, Arguments(tuple(args), dict(kwargs), site.name))


def _shape_evidence(site: Site, named: Sequence[NamedArgument]
                    ) -> Callable[[CheckResult], Mistake | None]:
    """Call the site with a random upstream and name what its wrong-shaped gradient is."""

    def evidence(result: CheckResult) -> Mistake | None:
        index = next((i for i, n in enumerate(named) if n.name == result.input), None)
        if index is None:
            return None
        args = [n.value for n in named]
        vjp = site_vjp(site, args, index)
        if vjp is None:
            return None
        grad, upstream, out_shape, in_shape = vjp
        jacobian, rtol = forward_jacobian(site, args, index, out_shape)
        return shape_mistake(grad, upstream, jacobian, in_shape, out_shape, rtol)

    return evidence


def site_results(site: Site, top_function: Callable[..., Any], top_report: Report,
                 options: CheckOptions) -> list[CheckResult]:
    """Check one custom_gradient on its own (or reuse the top-level report if it is f)."""
    if not site.calls or site.decorated is None:
        return violation_results(site) + variable_results(site)
    try:
        named = _site_arguments(site)
        if site.decorated is top_function:
            report = top_report
        else:
            site_options = replace(options, kinds=SITE_KINDS, upstream=())
            report = run_checks(site.decorated, named, site_options, site.name)
    except GradcheckError as error:
        return violation_results(site) + [CheckResult(
            Kind.CUSTOM_GRADIENT, Status.SKIP,
            f"custom_gradient {site.name} could not be checked on its own: {error.message}",
            location=site.definition)]
    # Violations seen while the site ran on its own (eagerly) count too.
    return (translate(site, report, _shape_evidence(site, named)) + violation_results(site)
            + variable_results(site))


def record_eager_calls(function: Callable[..., Any], named: Sequence[NamedArgument],
                       options: CheckOptions, observer: Observer) -> None:
    """Inside a tf.function, custom gradients only ever see symbolic tensors: run f once
    eagerly so that each one records concrete arguments to be checked on its own."""
    if not observer.sites or all(site.calls for site in observer.sites):
        return
    eager_call(lambda: prepare(function, named, options.dtype))
