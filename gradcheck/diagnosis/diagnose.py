"""Run the core checks, then say where and why: per-custom_gradient verdicts and graph breaks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from gradcheck.checks.run import check_program, run_checks
from gradcheck.diagnosis.custom_gradients import (
    ShapeMistake,
    merge_shape_findings,
    shape_diagnosis,
    translate,
    variable_results,
    violation_results,
)
from gradcheck.diagnosis.graph_breaks import USUAL_CAUSES, locate_cuts
from gradcheck.errors import GradcheckError
from gradcheck.load.inputs import Arguments, NamedArgument, name_arguments
from gradcheck.numerics import differences, tolerances
from gradcheck.options import CheckOptions
from gradcheck.report import CheckResult, Kind, Report, Status
from gradcheck.tf import program as autodiff
from gradcheck.tf.instrument import Observer, Site
from gradcheck.tf.runtime import tensorflow

SITE_KINDS = frozenset({"jacobian", "grad-shape", "connected", "custom-gradient", "fast"})
# Findings that explain a cut path when autodiff and finite differences disagree.
CUT_SYMPTOMS = frozenset({"connected", "jacobian", "vjp", "fast"})


def _site_arguments(site: Site) -> list[NamedArgument]:
    args, kwargs = site.calls[0]
    return name_arguments(site.forward, Arguments(tuple(args), dict(kwargs), site.name))


# Above this many input elements, a wrong-shaped grad_fn is described by shape alone.
SHAPE_EVIDENCE_SIZE = 256


def _forward_jacobian(site: Site, args: list[Any], index: int, out_shape: tuple[int, ...]
                      ) -> tuple[np.ndarray | None, float]:
    """The true Jacobian of the site's forward by central differences (its autodiff may be
    cut, e.g. by a tf.Variable), in float64 when the forward accepts it; and its precision."""
    tf = tensorflow()
    x = np.asarray(args[index], dtype=np.float64)
    if x.size > SHAPE_EVIDENCE_SIZE:
        return None, 0.0
    for dtype in dict.fromkeys(("float64", tf.convert_to_tensor(args[index]).dtype.name)):
        h = differences.step_sizes(x, dtype)

        def value(point: np.ndarray, dtype: str = dtype) -> np.ndarray:
            moved = list(args)
            moved[index] = tf.constant(point, dtype)
            return np.asarray(site.forward(*moved)[0], dtype=np.float64)

        try:
            columns = []
            for j in range(x.size):
                step = np.zeros(x.size)
                step[j] = h.flat[j]
                step = step.reshape(x.shape)
                columns.append((value(x + step) - value(x - step)) / (2 * h.flat[j]))
        except Exception:
            continue
        jacobian = np.stack(columns, axis=-1).reshape(out_shape + x.shape)
        return jacobian, tolerances.tolerance_for(dtype).rtol
    return None, 0.0


def _shape_evidence(
    site: Site, named: Sequence[NamedArgument]
) -> Callable[[CheckResult], ShapeMistake | None]:
    """Call the site with a random upstream and name what its wrong-shaped gradient is."""

    def evidence(result: CheckResult) -> ShapeMistake | None:
        tf = tensorflow()
        index = next((i for i, n in enumerate(named) if n.name == result.input), None)
        if index is None or site.decorated is None:
            return None
        args = [n.value for n in named]
        x = tf.constant(args[index])
        args[index] = x
        try:
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = site.decorated(*args)
            if not isinstance(y, tf.Tensor):
                return None
            upstream = np.random.default_rng(1).standard_normal(tuple(y.shape))
            grad = tape.gradient(y, x, output_gradients=tf.constant(upstream, y.dtype))
            jacobian, rtol = _forward_jacobian(site, args, index, tuple(y.shape))
        except Exception:
            return None
        if grad is None:
            return None
        return shape_diagnosis(np.asarray(grad), upstream, jacobian, tuple(x.shape),
                               tuple(y.shape), rtol)

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
    tf = tensorflow()
    previous = tf.config.functions_run_eagerly()
    tf.config.run_functions_eagerly(True)
    try:
        autodiff.prepare(function, named, options.dtype)
    except GradcheckError:
        pass  # f already ran fine in the core checks; nothing more to learn here
    finally:
        tf.config.run_functions_eagerly(previous)


def _failing_inputs(checks: Sequence[CheckResult], kinds: frozenset[str]) -> set[str]:
    return {c.input for c in checks if c.check in kinds and c.failed and c.input}


def graph_break_results(program: autodiff.Program, checks: Sequence[CheckResult],
                        explained: set[str]) -> tuple[list[CheckResult], list[CheckResult]]:
    """Cuts for inputs whose gradient is missing or wrong; the checks, annotated with them."""
    suspects = _failing_inputs(checks, CUT_SYMPTOMS) - explained
    if not suspects:
        return [], list(checks)
    lost = _failing_inputs(checks, frozenset({"connected"}))
    found: list[CheckResult] = []
    annotated = list(checks)
    for index, slot in enumerate(program.slots):
        if slot.name not in suspects:
            continue
        cuts, note = locate_cuts(program, index)
        if not cuts and slot.name not in lost:
            continue  # values are wrong but the path is there: nothing to locate
        if not cuts:
            why = f" ({note})" if note else ""
            found.append(CheckResult(
                Kind.GRAPH_BREAK, Status.WARN,
                f"could not locate where the gradient path from {slot.name} is lost{why};"
                f" usual causes: {USUAL_CAUSES}", input=slot.name))
            continue
        found += [CheckResult(Kind.GRAPH_BREAK, Status.FAIL, cut.message, input=slot.name,
                              location=cut.location) for cut in cuts]
        first = cuts[0]
        annotated = [
            replace(c, location=c.location or first.location,
                    message=f"{c.message}; likely cause: {first.cause}"
                            f"{' at ' + first.location if first.location else ''}")
            if c.input == slot.name and c.failed and c.check in CUT_SYMPTOMS else c
            for c in annotated
        ]
    return found, annotated


def diagnose(function: Callable[..., Any], named: Sequence[NamedArgument],
             options: CheckOptions, label: str, observer: Observer | None = None) -> Report:
    """The full report: site and graph-break findings first, then the core checks."""
    report, program = check_program(function, named, options, label)
    if observer is not None:
        record_eager_calls(function, named, options, observer)
    sites: list[CheckResult] = []
    surrogates: list[CheckResult] = []
    for site in observer.sites if observer is not None else ():
        found = site_results(site, function, report, options)
        if site.name in options.surrogates:
            surrogates += [r for r in found if r.failed]
            found = [_as_surrogate(r, site.name) for r in found]
        sites += found
    core = merge_shape_findings(report.checks, sites)
    if observer is not None and any(site.decorated is function for site in observer.sites):
        # f is itself the custom gradient: its site findings are the core's, re-labelled.
        core = [c for c in core if not (c.check == Kind.CUSTOM_GRADIENT and c.failed)]
    wrong_sites = [r for r in sites if r.failed]
    if wrong_sites:
        core = blame(core, wrong_sites)
    elif surrogates:
        core = excuse(core, surrogates)
    explained = {c.input for c in core if c.input} if wrong_sites or surrogates else set()
    breaks, core = graph_break_results(program, core, explained)
    notes = report.notes
    unexplained = [c for c in core if c.failed and c.location is None]
    if observer is None and unexplained:
        notes += (
            "custom gradients are checked on their own, with their grad_fn's line, only when"
            " gradcheck imports the module itself: pass 'path/to/module.py:function' or"
            " 'package.module:function' instead of the function object",)
    return replace(report, checks=tuple(sites + breaks + core), notes=notes)


def _as_surrogate(result: CheckResult, name: str) -> CheckResult:
    if not result.failed:
        return result
    return replace(result, status=Status.WARN,
                   message=f"{result.message}; declared a deliberate surrogate gradient"
                           f" (--surrogate {name}), so not a failure")


def excuse(core: Sequence[CheckResult], surrogates: Sequence[CheckResult]) -> list[CheckResult]:
    """f's mismatches are expected when only declared surrogate gradients differ."""
    culprit = surrogates[0].message.split(":", 1)[0]
    return [
        replace(c, status=Status.WARN, location=c.location or surrogates[0].location,
                message=f"{c.message}; expected: {culprit} is a declared surrogate")
        if c.failed and c.check in CUT_SYMPTOMS | {"jvp", "fast"} else c
        for c in core
    ]


def blame(core: Sequence[CheckResult], wrong_sites: Sequence[CheckResult]) -> list[CheckResult]:
    """Point f's own failing checks at the custom_gradient found wrong on its own."""
    first = wrong_sites[0]
    culprit = first.message.split(":", 1)[0]
    where = f" (grad_fn at {first.location})" if first.location else ""
    return [
        replace(c, location=c.location or first.location,
                message=f"{c.message}; likely cause: {culprit}{where}")
        if c.failed and c.check in CUT_SYMPTOMS | {"jvp", "fast"} else c
        for c in core
    ]
