"""Judge each observed tf.custom_gradient on its own, and name its grad_fn's mistakes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gradcheck.engine.observer import Site
from gradcheck.evidence import Location
from gradcheck.evidence.causes import (
    CausedOnItsOwn,
    Facts,
    NoneOnItsOwn,
    OnItsOwn,
    ProbedOnItsOwn,
    RaisedOnItsOwn,
    ReturnedShape,
    SecondOrderOnItsOwn,
    ShapeOnItsOwn,
    UpstreamProbe,
)
from gradcheck.evidence.connected import GradShape
from gradcheck.evidence.diagnosis import SiteCorrect, SiteMistake
from gradcheck.evidence.gradients import GradientRaised
from gradcheck.report import Cause, CheckResult, Kind, Mistake, Report, Status


@dataclass(frozen=True)
class Probe:
    """The site called on its own: what its wrong-shaped gradient is (`shape`), whether it
    ignores its upstream (`upstream`); None where that cannot be told."""

    shape: Callable[[CheckResult], Cause | None]
    upstream: Callable[[CheckResult], Cause | None]


def site_label(site: Site) -> str:
    line = site.definition.line if site.definition else None
    return f"custom_gradient {site.name}" + (f" (line {line})" if line else "")


def _located(site: Site, status: Status, check: Kind, mistake: Mistake,
             location: Location | None, facts: Facts | None = None,
             finding: CheckResult | None = None, **fields: Any) -> CheckResult:
    """A finding about the site, told by its cause (retelling `finding` of its own check)."""
    cause = Cause(mistake, site_label(site), location, facts)
    return CheckResult(check, status, evidence=SiteMistake(finding), location=location,
                       cause=cause, **fields)


def violation_results(site: Site) -> list[CheckResult]:
    return [_located(site, Status.FAIL, Kind.CUSTOM_GRADIENT, Mistake(v.kind),
                     v.location or site.grad_fn_location or site.definition, v.slip)
            for v in site.violations]


def variable_results(site: Site) -> list[CheckResult]:
    """tf.Variables created on every call of the site, in grad_fn or in the forward."""
    found = [_located(site, Status.FAIL, Kind.CUSTOM_GRADIENT, Mistake.VARIABLE_IN_GRAD_FN,
                      location) for location in site.grad_fn_variables]
    found += [_located(site, Status.WARN, Kind.GRAPH_BREAK, Mistake.VARIABLE_IN_FORWARD,
                       location) for location in site.forward_variables]
    return found


def _as_grad_fn_mistake(result: CheckResult, probe: Probe) -> tuple[Kind, Mistake, Facts] | None:
    """The kind, the mistake and the facts of one failing finding of the site's own check,
    told as the grad_fn's (None: not one to tell)."""
    cause = result.cause
    if result.check == Kind.GRAD_SHAPE and isinstance(result.evidence, GradShape):
        shape = probe.shape(result) or Cause(Mistake.WRONG_SHAPE, facts=ReturnedShape())
        evidence = result.evidence
        return Kind.GRAD_SHAPE, shape.mistake, ShapeOnItsOwn(
            result.input, tuple(evidence.gradient_shape or ()), tuple(evidence.input_shape),
            shape)
    if result.check == Kind.JACOBIAN and cause is not None:
        return Kind.CUSTOM_GRADIENT, cause.mistake, CausedOnItsOwn(result)
    if result.check == Kind.CONNECTED:
        return Kind.CUSTOM_GRADIENT, Mistake.NONE, NoneOnItsOwn(result)
    if result.check == Kind.VJP:
        upstream = probe.upstream(result) or Cause(Mistake.WRONG_VALUES, facts=UpstreamProbe())
        return Kind.CUSTOM_GRADIENT, upstream.mistake, ProbedOnItsOwn(result, upstream)
    if result.check in (Kind.SECOND_ORDER, Kind.HESSIAN):
        return (result.check, cause.mistake if cause else Mistake.SECOND_ORDER,
                SecondOrderOnItsOwn(result))
    if result.check in (Kind.JACOBIAN, Kind.CUSTOM_GRADIENT, Kind.FAST):
        raised = isinstance(result.evidence, GradientRaised) and result.attributed_to is None
        return (Kind.CUSTOM_GRADIENT, cause.mistake if cause else Mistake.WRONG_VALUES,
                (RaisedOnItsOwn if raised else OnItsOwn)(result))
    return None


def _translated(site: Site, result: CheckResult, location: Location | None, probe: Probe
                ) -> CheckResult | None:
    """One failing finding of the site's own check, told as the grad_fn's mistake."""
    as_grad_fn = _as_grad_fn_mistake(result, probe)
    if as_grad_fn is None:
        return None
    check, mistake, facts = as_grad_fn
    # A grad_fn that raised is located at its raise; the rest at grad_fn's return.
    raised = result.check in (Kind.CUSTOM_GRADIENT, Kind.FAST) or (
        result.check == Kind.JACOBIAN and result.cause is None)
    return _located(site, result.status, check, mistake,
                    (result.location or location) if raised else location, facts,
                    finding=result, input=result.input, output=result.output,
                    max_abs_err=result.max_abs_err, max_rel_err=result.max_rel_err,
                    worst_index=result.worst_index, excess=result.excess)


def translate(site: Site, report: Report, probe: Probe) -> list[CheckResult]:
    """Re-label the findings of a check run on the site alone: its name, its grad_fn line.
    A wrong VJP is told only for an input whose first derivative was not already found wrong
    (a wrong second derivative does not make a first-order mistake told twice)."""
    location = site.grad_fn_location or site.definition
    wrong = {r.input for r in report.checks if r.failed and r.check not in (
        Kind.VJP, Kind.SECOND_ORDER, Kind.HESSIAN)}
    results = [translated for result in report.checks if result.failed
               and not (result.check == Kind.VJP and result.input in wrong)
               and (translated := _translated(
                   site, result, site.input_grad_locations.get(result.input or "", location),
                   probe))]
    if not results and not site.violations:
        results.append(CheckResult(Kind.CUSTOM_GRADIENT, Status.PASS,
                                   evidence=SiteCorrect(site_label(site)),
                                   location=site.definition))
    return results


def merge_shape_findings(core: Sequence[CheckResult],
                         site_results: Sequence[CheckResult]) -> list[CheckResult]:
    """Site-level grad-shape findings replace the core's anonymous ones."""
    if not any(r.check == Kind.GRAD_SHAPE and r.status == Status.FAIL for r in site_results):
        return list(core)
    return [r for r in core if r.check != Kind.GRAD_SHAPE]

