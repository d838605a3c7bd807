"""Each observed tf.custom_gradient checked on its own, at the arguments it was called with."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from gradcheck.check_settings import CheckSettings
from gradcheck.checks.run import check_function
from gradcheck.diagnosis.custom_gradients import (
    Probe,
    site_label,
    translate,
    variable_results,
    violation_results,
)
from gradcheck.engine.binding import prepare
from gradcheck.engine.observer import Observer, Site, Slip, defines, installed, replaying
from gradcheck.engine.sites import (
    eager_call,
    forward_jacobian,
    lacks_forward_mode,
    site_vjp,
    traced,
)
from gradcheck.errors import GradcheckError
from gradcheck.evidence.causes import UpstreamProbe
from gradcheck.evidence.diagnosis import SiteNoForwardMode, SiteUnchecked
from gradcheck.evidence.gradients import GradientRaised
from gradcheck.load.inputs import Arguments, name_arguments
from gradcheck.numerics.mistakes import shape_mistake
from gradcheck.options import CheckOptions
from gradcheck.report import Cause, CheckResult, Kind, Mistake, Report, Status
from gradcheck.targets.named import NamedArgument

# VJP: a random upstream, so that a grad_fn ignoring its upstream fails even at a scalar output
# (whose Jacobian is checked with the upstream 1 only).
SITE_KINDS = frozenset({Kind.JACOBIAN, Kind.GRAD_SHAPE, Kind.CONNECTED, Kind.CUSTOM_GRADIENT,
                        Kind.FAST, Kind.SECOND_ORDER, Kind.VJP})


def _site_arguments(site: Site) -> list[NamedArgument]:
    args, kwargs = site.calls[0]
    return name_arguments(site.forward, Arguments(tuple(args), dict(kwargs), site.name))


def _parts(named: Sequence[NamedArgument]) -> tuple[list[Any], dict[str, Any]]:
    """The positional and keyword arguments of the site's recorded call."""
    return ([n.value for n in named if n.position is not None],
            {n.keyword: n.value for n in named if n.keyword is not None})


def _position(named: Sequence[NamedArgument], name: str | None) -> int | None:
    return next((n.position for n in named if n.name == name), None)


def _judged(site: Site, named: Sequence[NamedArgument]
            ) -> tuple[Callable[..., Any], list[NamedArgument]]:
    """The site as a function of the positional arguments f's sources flow into (all of them
    when no call was seen under a tape); the others keep the values they were called with."""
    decorated = site.decorated
    assert decorated is not None
    positional, keywords = _parts(named)
    chosen = [n for n in named if n.position is not None and (
        site.differentiated is None or n.position in site.differentiated)]

    def judged(*values: Any) -> Any:
        args = list(positional)
        for argument, value in zip(chosen, values):
            args[argument.position] = value  # type: ignore[index]
        return decorated(*args, **keywords)

    judged.__name__ = site.name
    judged.__wrapped__ = decorated  # type: ignore[attr-defined]  # its variables' user names
    return judged, [replace(n, position=index) for index, n in enumerate(chosen)]


def _call_for(named: Sequence[NamedArgument], result: CheckResult
              ) -> tuple[int, list[Any], dict[str, Any]] | None:
    """The position of the result's input among the site's arguments, and the arguments."""
    index = _position(named, result.input)
    if index is None:
        return None
    args, kwargs = _parts(named)
    return index, args, kwargs


def _shape_evidence(site: Site, named: Sequence[NamedArgument]
                    ) -> Callable[[CheckResult], Cause | None]:
    """Call the site with a random upstream and name what its wrong-shaped gradient is."""

    def evidence(result: CheckResult) -> Cause | None:
        call = _call_for(named, result)
        if call is None:
            return None
        index, args, kwargs = call
        vjp = site_vjp(site, args, index, kwargs=kwargs)
        if vjp is None:
            return None
        grad, upstream, out_shape, in_shape = vjp
        jacobian, rtol = forward_jacobian(site, args, index, out_shape, kwargs)
        return shape_mistake(grad, upstream, jacobian, in_shape, out_shape, rtol)

    return evidence


def _upstream_evidence(site: Site, named: Sequence[NamedArgument]
                       ) -> Callable[[CheckResult], Cause | None]:
    """Call the site with two random upstreams: the same gradient for both ignores them."""

    def evidence(result: CheckResult) -> Cause | None:
        call = _call_for(named, result)
        if call is None:
            return None
        index, args, kwargs = call
        first, second = (site_vjp(site, args, index, seed, kwargs) for seed in (1, 2))
        if first is None or second is None or np.allclose(first[1], second[1]):
            return None
        if np.allclose(first[0], second[0], rtol=1e-9, atol=0.0):
            return Cause(Mistake.IGNORED_UPSTREAM, facts=UpstreamProbe(ignored=True))
        return None

    return evidence


def _forward_mode_gaps(site: Site, named: Sequence[NamedArgument],
                       options: CheckOptions) -> list[CheckResult]:
    """A site that forward mode cannot go through, named (f's jvp check skips it)."""
    if Kind.JVP not in options.kinds:
        return []
    args, kwargs = _parts(named)
    return [CheckResult(
        Kind.JVP, Status.SKIP, evidence=SiteNoForwardMode(site_label(site)), input=n.name,
        location=site.definition)
        for n in named if n.position is not None
        and (site.differentiated is None or n.position in site.differentiated)
        and lacks_forward_mode(site, args, n.position, kwargs)]


def _checked_alone(site: Site, named: list[NamedArgument], options: CheckOptions,
                   settings: CheckSettings) -> Report | None:
    function, judged = _judged(site, named)
    if not judged:
        return None  # f differentiates none of its arguments (passed by keyword, constants)
    # The site's own arguments are what its grad_fn differentiates, whatever f's sources were
    # (under wrt="variables" the site alone would have nothing to judge, and pass).
    site_options = replace(options, kinds=SITE_KINDS, upstream=(), wrt="all")
    report = check_function(function, judged, site_options, settings, site.name)
    if site.graph_only and any(_graph_only(r) for r in report.checks):
        # A grad_fn written for graph mode (tf.gradients inside), called in f's tf.function:
        # judged eagerly it raises only because of how gradcheck calls it.
        report = check_function(traced(function), judged, site_options, settings, site.name)
    return report


def _graph_only(result: CheckResult) -> bool:
    evidence = result.evidence and result.evidence.underlying()
    return isinstance(evidence, GradientRaised) and (
        "is not supported when eager execution is enabled" in evidence.error)


def site_results(site: Site, top_function: Callable[..., Any], top_report: Report,
                 options: CheckOptions, settings: CheckSettings) -> list[CheckResult]:
    """Check one custom_gradient on its own (or reuse the top-level report if it is f). One
    in an installed library is checked on its own only when f's own checks fail: where they
    pass, it gives f's gradient correctly, and checking it costs as much as f."""
    if not site.calls or site.decorated is None or (
            installed(site) and not any(c.failed for c in top_report.checks)):
        return violation_results(site) + variable_results(site)
    with replaying():
        try:
            named = _site_arguments(site)
            report = top_report if defines(site, top_function) else _checked_alone(
                site, named, options, settings)
        except GradcheckError as error:
            return violation_results(site) + [CheckResult(
                Kind.CUSTOM_GRADIENT, Status.SKIP,
                evidence=SiteUnchecked(site.name, error.message), location=site.definition)]
        # Violations seen while the site ran on its own (eagerly) count too.
        found = [] if report is None else translate(site, report, Probe(
            _shape_evidence(site, named), _upstream_evidence(site, named)))
        found += _forward_mode_gaps(site, named, options)
    violations = violation_results(site)
    # A grad_fn without `variables=` first: TensorFlow refuses it outright (the user's own run
    # never gets further), and the values above were measured on gradcheck's repair of it.
    refused = [r for r in violations if r.cause and r.cause.mistake == Mistake.VARIABLES]
    return (refused + _without_refused(site, found)
            + [r for r in violations if r not in refused] + variable_results(site))


def _without_refused(site: Site, found: list[CheckResult]) -> list[CheckResult]:
    """The site's findings, less "grad_fn returns None" for variables its grad_fn cannot
    return gradients for: TensorFlow refuses a grad_fn without `variables=` (a violation
    that says so), and the None is only that."""
    refused = {name for v in site.violations if v.kind == Slip.VARIABLES
               for name in v.slip.names}
    return [r for r in found if not (r.input in refused and r.cause is not None
                                     and r.cause.mistake == Mistake.NONE)]


def record_eager_calls(function: Callable[..., Any], named: Sequence[NamedArgument],
                       options: CheckOptions, observer: Observer) -> None:
    """Inside a tf.function, custom gradients only ever see symbolic tensors: run f once
    eagerly so that each one records concrete arguments to be checked on its own."""
    unseen = [site for site in observer.sites if not site.calls]
    if not unseen:
        return
    eager_call(lambda: prepare(function, named, options.dtype))
    for site in unseen:
        site.graph_only = True
