"""Judge each observed tf.custom_gradient on its own, and name the mistake in words."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gradcheck.evidence import Location
from gradcheck.evidence.diagnosis import SiteCorrect, SiteMistake
from gradcheck.numerics.mistakes import FIX_HINT, Mistake
from gradcheck.report import Cause, CheckResult, Kind, Report, Status
from gradcheck.report import Mistake as MistakeKind
from gradcheck.tf.instrument import Site


def site_label(site: Site) -> str:
    line = site.definition.line if site.definition else None
    return f"custom_gradient {site.name}" + (f" (line {line})" if line else "")


def _located(site: Site, status: Status, check: Kind, mistake: MistakeKind, what: str,
             location: Location | None, *, fix: str | None = None, **fields: Any) -> CheckResult:
    """A finding about the site, told by its cause."""
    cause = Cause(mistake, what, site_label(site), location, fix)
    return CheckResult(check, status, evidence=SiteMistake(), location=location, cause=cause,
                       **fields)


def violation_results(site: Site) -> list[CheckResult]:
    return [_located(site, Status.FAIL, Kind.CUSTOM_GRADIENT, MistakeKind(v.kind), v.message,
                     v.location or site.grad_fn_location or site.definition)
            for v in site.violations]


def variable_results(site: Site) -> list[CheckResult]:
    """tf.Variables created on every call of the site, in grad_fn or in the forward."""
    found = [_located(
        site, Status.FAIL, Kind.CUSTOM_GRADIENT, MistakeKind.VARIABLE_IN_GRAD_FN,
        "grad_fn creates a tf.Variable on every call: the vectorised tape.jacobian"
        " (experimental_use_pfor=True, the default) then returns None without a word (or"
        " raises, on a persistent tape) while tape.gradient works, and a tf.function refuses"
        " to create it after its first call", location,
        fix="use tf.constant (or any tensor) for fixed values inside grad_fn")
        for location in site.grad_fn_variables]
    found += [_located(
        site, Status.WARN, Kind.GRAPH_BREAK, MistakeKind.VARIABLE_IN_FORWARD,
        "creates a tf.Variable in its forward pass: a tf.Variable copies its initial value, so"
        " built from the inputs outside a custom_gradient this line cuts the gradient path"
        " (tape.gradient returns None; here grad_fn alone carries the gradient), and a"
        " tf.function refuses to create variables on every call", location,
        fix="build the output from tensors (tf.stack, tf.concat) instead")
        for location in site.forward_variables]
    return found


def _translated(site: Site, result: CheckResult, location: Location | None,
                shape_evidence: Callable[[CheckResult], Mistake | None],
                upstream_evidence: Callable[[CheckResult], Mistake | None]
                ) -> CheckResult | None:
    """One failing finding of the site's own check, told as the grad_fn's mistake."""
    fields: dict[str, Any] = {"input": result.input, "output": result.output,
              "max_abs_err": result.max_abs_err, "max_rel_err": result.max_rel_err,
              "worst_index": result.worst_index, "excess": result.excess,
              "details": result.details}
    if result.check == Kind.GRAD_SHAPE:
        mistake = shape_evidence(result) or Mistake("wrong-shape", "returned the wrong shape")
        shapes = result.details
        what = (f"grad_fn returns shape {tuple(shapes.get('gradient_shape', ()))} for input"
                f" {result.input} of shape {tuple(shapes.get('input_shape', ()))}: it"
                f" {mistake.what}")
        return _located(site, result.status, Kind.GRAD_SHAPE, MistakeKind(mistake.kind), what,
                        location, fix=mistake.fix or FIX_HINT, **fields)
    if result.check == Kind.JACOBIAN and result.cause is not None:
        return _located(site, result.status, Kind.CUSTOM_GRADIENT, result.cause.mistake,
                        f"grad_fn {result.cause.what} for input {result.input}"
                        f" ({result.message})", location, fix=result.cause.fix, **fields)
    if result.check == Kind.CONNECTED:
        return _located(site, result.status, Kind.CUSTOM_GRADIENT, MistakeKind.NONE,
                        f"grad_fn returns None for input {result.input}, but finite"
                        f" differences show {result.output} depends on it", location, **fields)
    if result.check == Kind.VJP:
        mistake = upstream_evidence(result) or Mistake(
            "wrong-values", "returns a wrong VJP for a random upstream")
        return _located(site, result.status, Kind.CUSTOM_GRADIENT, MistakeKind(mistake.kind),
                        f"grad_fn {mistake.what} for input {result.input} ({result.message})",
                        location, fix=mistake.fix, **fields)
    if result.check in (Kind.SECOND_ORDER, Kind.HESSIAN):
        cause = result.cause
        what = cause.what if cause else "has a wrong second derivative"
        return _located(site, result.status, result.check,
                        cause.mistake if cause else MistakeKind.SECOND_ORDER,
                        f"grad_fn {what}" + (f" for input {result.input}" if result.input else "")
                        + f": {result.message}", location,
                        **fields)
    if result.check in (Kind.JACOBIAN, Kind.CUSTOM_GRADIENT, Kind.FAST):
        # A grad_fn that raised is located at its raise; the rest at grad_fn's return.
        cause, what = result.cause, result.message
        if cause is not None and cause.fix:
            what = what.removesuffix(f"; {cause.fix}")
        return _located(site, result.status, Kind.CUSTOM_GRADIENT,
                        cause.mistake if cause else MistakeKind.WRONG_VALUES, what,
                        result.location or location, fix=cause.fix if cause else None,
                        **fields)
    return None


def translate(site: Site, report: Report,
              shape_evidence: Callable[[CheckResult], Mistake | None],
              upstream_evidence: Callable[[CheckResult], Mistake | None]) -> list[CheckResult]:
    """Re-label the findings of a check run on the site alone: its name, its grad_fn line.
    A wrong VJP is told only for an input whose Jacobian was not already found wrong."""
    location = site.grad_fn_location or site.definition
    wrong = {r.input for r in report.checks if r.failed and r.check != Kind.VJP}
    results = [translated for result in report.checks if result.failed
               and not (result.check == Kind.VJP and result.input in wrong)
               and (translated := _translated(site, result, location, shape_evidence,
                                              upstream_evidence))]
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

