"""Run the core checks, then say where and why: per-custom_gradient verdicts, graph breaks,
and f's failures attributed to them."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from gradcheck.check_settings import CheckSettings
from gradcheck.checks.run import IntegerOutputs, check_program
from gradcheck.diagnosis.attribution import as_surrogate, blame, excuse, in_gradient
from gradcheck.diagnosis.custom_gradients import merge_shape_findings
from gradcheck.diagnosis.graph_breaks import graph_break_results, integer_output_cuts
from gradcheck.diagnosis.non_finite import non_finite_results
from gradcheck.diagnosis.sites import record_eager_calls, site_results
from gradcheck.diagnosis.tensorflow_gradients import tensorflow_gradient_causes
from gradcheck.engine.observer import Observer, defines
from gradcheck.errors import InputError
from gradcheck.evidence.diagnosis import CutNotFound, SiteMistake
from gradcheck.evidence.gradients import CutPath
from gradcheck.evidence.non_finite import NonFiniteSeen, NoVerdictAtNonFinite
from gradcheck.kinds.jacobian.evidence import Disagreement
from gradcheck.kinds.precision.evidence import PrecisionLoss
from gradcheck.options import CheckOptions
from gradcheck.report import CheckResult, Kind, Report, Status
from gradcheck.targets.named import NamedArgument

# The findings made of finite differences of f's values.
BUILT_ON_VALUES = frozenset({Kind.CONNECTED, Kind.JACOBIAN, Kind.VJP, Kind.FAST})


def diagnose(function: Callable[..., Any], named: Sequence[NamedArgument],
             options: CheckOptions, settings: CheckSettings, label: str,
             observer: Observer | None = None) -> Report:
    """The full report: site and graph-break findings first, then the core checks."""
    try:
        report, program = check_program(function, named, options, settings, label)
    except IntegerOutputs as integer:
        cuts = integer_output_cuts(integer.recording.program)
        if not cuts:
            raise
        return integer.report(label, cuts)
    if observer is not None:
        record_eager_calls(function, named, options, observer)
        _known_surrogates(options.surrogates, [site.name for site in observer.sites], label)
    sites: list[CheckResult] = []
    surrogates: list[CheckResult] = []
    ran: list[CheckResult] = []  # failed findings of sites whose grad_fn ran in f's gradient
    for site in observer.sites if observer is not None else ():
        found = site_results(site, function, report, options, settings)
        if site.grad_fn_ran:
            ran += [r for r in found if r.failed]
        if site.name in options.surrogates:
            surrogates += [r for r in found if r.failed]
            found = [as_surrogate(r, site.name) for r in found]
        sites += found
    core = merge_shape_findings(report.checks, sites)
    if observer is not None and any(defines(site, function) for site in observer.sites):
        # f is itself the custom gradient: its site findings are the core's, re-labelled.
        core = [c for c in core if not (c.failed and c.check in (
            Kind.CUSTOM_GRADIENT, Kind.SECOND_ORDER, Kind.HESSIAN))]
    wrong_sites = [r for r in sites if r.failed]
    core = [c for c in core if not _repeats_a_site_finding(c, wrong_sites)]
    seen = any(site.grad_fn_ran for site in observer.sites) if observer is not None else False
    culprits, excuses = in_gradient(wrong_sites, ran, seen), in_gradient(surrogates, ran, seen)
    if culprits:
        core = blame(core, culprits)
    elif excuses:
        core = excuse(core, excuses)
    explained = {c.input for c in core if c.input} if culprits or excuses else set()
    breaks, core = graph_break_results(program, core, explained)
    non_finite, core = non_finite_results(program, core, options)
    core = _overflows_located(core, non_finite)
    core = _not_built_on_non_finite(core, non_finite)
    breaks = _unfounded_searches(breaks, core)
    core = tensorflow_gradient_causes(program, core)
    return replace(report, checks=tuple(sites + breaks + non_finite + core))


def _overflows_located(checks: Sequence[CheckResult], non_finite: Sequence[CheckResult]
                       ) -> list[CheckResult]:
    """A low-precision gradient that overflows is at the line of the first op that turns
    finite values into non-finite ones (the non-finite check's)."""
    where = next((c.location for c in non_finite if c.location is not None), None)
    return [replace(c, location=where) if c.check == Kind.PRECISION and c.failed
            and where is not None and isinstance(c.evidence, PrecisionLoss)
            and c.evidence.overflow > 0 and c.location is None
            else c for c in checks]


def _non_finite_evidence(result: CheckResult) -> bool:
    """A finding whose own numbers are NaN or infinite: a dependence seen only where finite
    differences are, or a comparison whose worst reference value is."""
    evidence = result.evidence
    if isinstance(evidence, CutPath):
        return not math.isfinite(evidence.magnitude)
    disagreement = getattr(evidence, "disagreement", None)
    return isinstance(disagreement, Disagreement) and not math.isfinite(disagreement.expected)


def _not_built_on_non_finite(checks: Sequence[CheckResult], non_finite: Sequence[CheckResult]
                             ) -> list[CheckResult]:
    """Once f's own value is found NaN or infinite, a connected, jacobian or vjp finding whose
    evidence is finite differences of those values says nothing more: no verdict, at the
    non-finite finding's line (whatever else had located it)."""
    seen = next((f for f in non_finite if isinstance(f.evidence, NonFiniteSeen)
                 and not f.evidence.gradient), None)
    if seen is None:
        return list(checks)
    assert isinstance(seen.evidence, NonFiniteSeen)
    name, produced = seen.evidence.name, seen.evidence.produced
    return [CheckResult(c.check, Status.SKIP, input=c.input, output=c.output,
                        location=seen.location,
                        evidence=NoVerdictAtNonFinite(str(c.check), name, produced))
            if c.failed and c.check in BUILT_ON_VALUES and _non_finite_evidence(c) else c
            for c in checks]


def _unfounded_searches(breaks: Sequence[CheckResult], checks: Sequence[CheckResult]
                        ) -> list[CheckResult]:
    """A search for the cut that found none stands on a connected finding: when that finding
    has no verdict (its dependence was seen only in non-finite values), neither has it."""
    cut = {c.input for c in checks if c.check == Kind.CONNECTED and c.failed}
    unjudged = {c.input for c in checks if c.check == Kind.CONNECTED
                and isinstance(c.evidence, NoVerdictAtNonFinite)}
    return [b for b in breaks if not (isinstance(b.evidence, CutNotFound)
                                      and b.input in unjudged - cut)]


def _repeats_a_site_finding(result: CheckResult, sites: Sequence[CheckResult]) -> bool:
    """A core finding that a custom gradient's own finding tells again, at the same line, from
    the same evidence (a grad_fn that raises: f's gradient raises the same)."""
    return result.failed and result.evidence is not None and any(
        site.check == result.check and site.location == result.location
        and isinstance(site.evidence, SiteMistake) and site.evidence.finding is not None
        and site.evidence.finding.evidence == result.evidence for site in sites)


def _known_surrogates(surrogates: frozenset[str], names: Sequence[str], label: str) -> None:
    """A surrogate that names none of the custom gradients met would excuse nothing."""
    unknown = sorted(surrogates - set(names))
    if unknown:
        found = ", ".join(sorted(set(names))) or "none"
        raise InputError(f"surrogate {unknown[0]!r} is not a tf.custom_gradient that {label}"
                         f" uses (its custom gradients: {found})")
