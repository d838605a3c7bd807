"""Sentences about fast mode's random projections."""

from __future__ import annotations

import functools

import numpy as np

from gradcheck.evidence.fast import (
    BlockFailed,
    ProbeFailed,
    ProjectedCut,
    ProjectedGradientRaised,
    ProjectedGradShape,
    ProjectedUnconnected,
    Projections,
    ProjectionsAgree,
)
from gradcheck.render.sentences.dispatch import clause, sentence
from gradcheck.report import CheckResult
from gradcheck.spelling import format_index, format_size


def _can_miss(run: Projections) -> str:
    return (f"{run.probes_run} random projection(s) ran (seed {run.seed}); an error whose"
            f" effect on ⟨u, J v⟩ stays below the tolerance (here about {run.tolerance:.1e}) is"
            " missed, so errors in a few small elements can go unseen: --mode full checks every"
            f" element (it needs about {format_size(run.full_mode_bytes)} of --max-memory)")


def _failed_probe(run: Projections) -> str:
    later = " (the later ones were not run)" if run.probes_run < run.probes else ""
    return f"probe {run.failed_probes[0] + 1} of {run.probes} failed{later}"


def _slice(shape: tuple[int, ...], start: int, stop: int) -> str:
    def index(flat: int) -> str:
        return format_index(tuple(int(v) for v in np.unravel_index(flat, shape)))

    if stop - start == 1:
        return index(start)
    return f"{index(start)}..{index(stop - 1)} ({stop - start} elements)"


def _around(evidence: BlockFailed) -> str:
    return ", ".join(_slice(evidence.input_shape, a, b) for a, b in evidence.elements)


@clause.register
def _agree(evidence: ProjectionsAgree, result: CheckResult) -> str:
    return (f"⟨u, J v⟩ from tape.gradient matches central differences along v for every probe"
            f" (largest discrepancy {evidence.largest_error:.1e}, allowed"
            f" {evidence.tolerance:.1e})")


@clause.register
def _probe_failed(evidence: ProbeFailed, result: CheckResult) -> str:
    return (f"{_failed_probe(evidence)}: ⟨Jᵀu, v⟩ = {evidence.autodiff:.6g} from tape.gradient,"
            f" central differences along v give {evidence.finite_difference:.6g} (allowed"
            f" {evidence.allowed:.1e})")


@clause.register
def _block_failed(evidence: BlockFailed, result: CheckResult) -> str:
    return (f"{_failed_probe(evidence)}: for {evidence.output} and {evidence.input}, ⟨Jᵀu, v⟩"
            f" from tape.gradient is {evidence.autodiff:.6g} but central differences along v"
            f" give {evidence.finite_difference:.6g} (allowed {evidence.allowed:.1e})")


@functools.singledispatch
def _continuation(evidence: Projections, result: CheckResult) -> str:
    """What the whole message says after the headline: what was found and what can be
    missed."""
    return _can_miss(evidence)


@_continuation.register
def _no_single_block(evidence: ProbeFailed, result: CheckResult) -> str:
    return f"no single (output, input) block fails on its own; {_can_miss(evidence)}"


@_continuation.register
def _where_wrong(evidence: BlockFailed, result: CheckResult) -> str:
    return (f"the gradient is wrong around {evidence.input}{_around(evidence)};"
            f" {_can_miss(evidence)}")


@_continuation.register
def _nothing_more(evidence: ProjectedCut, result: CheckResult) -> str:
    return ""


@clause.register
def _cut(evidence: ProjectedCut, result: CheckResult) -> str:
    return (f"the gradient path from {evidence.input} to {evidence.output} is cut: autodiff"
            f" returns None, but central differences along random directions show"
            f" {evidence.output} depends on {evidence.input} (around {_around(evidence)})")


@sentence.register
def _projections(evidence: Projections, result: CheckResult) -> str:
    return "; ".join(part for part in (clause(evidence, result), _continuation(evidence, result))
                     if part)


@sentence.register
def _unconnected(evidence: ProjectedUnconnected, result: CheckResult) -> str:
    return (f"autodiff returns None for {evidence.input} and the random projections agree that"
            f" the outputs do not depend on {evidence.input}")


@sentence.register
def _grad_shape(evidence: ProjectedGradShape, result: CheckResult) -> str:
    return (f"the gradient with respect to {evidence.input} has shape {evidence.gradient_shape},"
            f" but {evidence.input} has shape {evidence.input_shape}: a gradient (and a"
            " custom_gradient grad_fn) must return uᵀJ with its input's shape")


@sentence.register
def _raised(evidence: ProjectedGradientRaised, result: CheckResult) -> str:
    return f"computing the gradient raised {evidence.error}"
