"""The nondeterminism check: two calls of f with the same inputs must agree, and two backward
passes from one call must be bitwise equal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gradcheck.engine.program import OutputLeaf, flatten_outputs, output_base
from gradcheck.engine.recording import Recording
from gradcheck.evidence.causes import OutputChanged
from gradcheck.forensics.culprits import (
    backward_nondeterministic_sites,
    is_random_op,
    recomputed_random_sites,
    stateful_sites,
)
from gradcheck.forensics.op_types import VARIABLE_WRITE_OPS
from gradcheck.kinds.nondeterminism.evidence import (
    BackwardNondeterministic,
    ChangingState,
    Nondeterministic,
)
from gradcheck.numerics.tolerances import machine_eps
from gradcheck.report import Cause, CheckResult, Kind, Mistake, Status
from gradcheck.targets.keras import random_layers


def _output_change(then: OutputLeaf, now: OutputLeaf) -> OutputChanged | None:
    """How one output differs between two calls (beyond rounding), or None."""
    if then.tensor is None or then.shape != now.shape:
        return OutputChanged(now.name, shapes=(then.shape, now.shape))
    a = np.asarray(then.tensor, dtype=np.float64)
    b = np.asarray(now.tensor, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf is NaN: judged below as no change
        gap = np.abs(a - b)
    allowed = 8 * machine_eps(now.dtype) * (np.abs(b) + np.max(np.abs(b), initial=0.0))
    # NaN on one call only counts as a change; the same NaN or infinity on both does not
    # (a deterministic non-finite value is the non-finite check's).
    bad = ~((gap <= allowed) | (a == b) | (np.isnan(a) & np.isnan(b)))
    if not np.any(bad):
        return None
    ranked = np.where(bad, np.nan_to_num(gap, nan=np.inf), -1.0)
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(ranked)), b.shape)) or None
    return OutputChanged(now.name, largest=float(ranked[index] if index else ranked),
                         index=index)


def _repeats(before: Sequence[OutputLeaf], recording: Recording,
             diff_outputs: Sequence[int]) -> bool:
    """Whether another call of f without a tape repeats the first one's values: then what
    changed them on the recorded call is the GradientTape."""
    try:
        again = flatten_outputs(recording.program.call(), output_base(recording.program))
    except Exception:  # noqa: BLE001 - f worked twice already; a third failure tells nothing
        return False
    return [o.name for o in again] == [o.name for o in before] and all(
        _output_change(before[k], again[k]) is None for k in diff_outputs)


def changed_between_calls(first: Any, recording: Recording, diff_outputs: Sequence[int],
                          name: str) -> CheckResult | None:
    """A `nondeterminism` failure when two calls with the same inputs disagree."""
    before = flatten_outputs(first, output_base(recording.program))
    change: OutputChanged | None = OutputChanged()  # its structure changed
    if [o.name for o in before] == [o.name for o in recording.outputs]:
        change = next((c for k in diff_outputs
                       if (c := _output_change(before[k], recording.outputs[k])) is not None),
                      None)
    if change is None:
        return None
    if _repeats(before, recording, diff_outputs):
        return CheckResult(
            Kind.NONDETERMINISM, Status.FAIL,
            evidence=Nondeterministic(name, under_tape=True), output=change.output,
            max_abs_err=change.largest, worst_index=change.index,
            cause=Cause(Mistake.TAPE_DEPENDENT, facts=change))
    layers = tuple(random_layers(recording.program.function))
    if not layers and recording.created_variables:
        return CheckResult(
            Kind.NONDETERMINISM, Status.FAIL,
            evidence=Nondeterministic(name, created_variables=recording.created_variables),
            output=change.output, max_abs_err=change.largest, worst_index=change.index,
            location=recording.created_at,
            cause=Cause(Mistake.RANDOM, None, recording.created_at, change))
    sites = [] if layers else stateful_sites(recording.program, diff_outputs)
    located = next((site for site in sites if site.location), None)
    state = None if located is None or located.location is None else ChangingState(
        located.op in VARIABLE_WRITE_OPS, located.name, located.location,
        len({(s.op, s.location) for s in sites}) - 1)
    return CheckResult(
        Kind.NONDETERMINISM, Status.FAIL,
        evidence=Nondeterministic(name, layers, state,
                                  recomputed=_recomputed(recording, diff_outputs)),
        output=change.output, max_abs_err=change.largest, worst_index=change.index,
        location=located.location if located is not None else None,
        cause=Cause(Mistake.RANDOM, ", ".join(layers) or (
            located.name if located is not None else None),
            located.location if located is not None else None, change))


def _recomputed(recording: Recording, diff_outputs: Sequence[int]) -> ChangingState | None:
    """The first located random op that tf.recompute_grad draws again in the backward pass."""
    sites = [s for s in recomputed_random_sites(recording.program, diff_outputs) if s.location]
    # The op that draws the numbers, rather than the one that reads a seed's counter.
    drawn = [s for s in sites if "KeyCounter" not in s.op] or sites
    if not drawn:
        return None
    assert drawn[0].location is not None
    return ChangingState(False, drawn[0].op, drawn[0].location,
                         len({(s.op, s.location) for s in sites}) - 1)


def _bitwise_equal(first: Any, second: Any) -> bool:
    if first.error is not None or second.error is not None or first.value is None:
        return first.value is None and second.value is None
    return second.value is not None and np.array_equal(first.value, second.value,
                                                       equal_nan=True)


def backward_changed(recording: Recording, diff_outputs: Sequence[int],
                     upstreams: Sequence[np.ndarray], name: str) -> CheckResult | None:
    """A `nondeterminism` failure when the VJP, taken twice from the same forward pass, is not
    bitwise equal, naming the backward op that explains it. The first is kept: it is the VJP
    the vjp and compiled checks judge."""
    sources = [slot for slot in recording.program.slots if slot.differentiable]
    if not sources:
        return None
    first = recording.kept_gradients(diff_outputs, sources, upstreams)
    second = recording.gradients(diff_outputs, sources, upstreams)
    changed = next((slot for slot, a, b in zip(sources, first, second)
                    if not _bitwise_equal(a, b)), None)
    if changed is None:
        return None
    sites = backward_nondeterministic_sites(recording.program, diff_outputs)
    site = next((s for s in sites if s.location), sites[0] if sites else None)
    others = tuple(sorted({s.op for s in sites} - {site.op})) if site else ()
    random = site is not None and is_random_op(site.op)
    again = recomputed_random_sites(recording.program, diff_outputs) if (
        site is None or random) else []
    match = next((r for r in again if site is None or (r.op, r.location) == (
        site.op, site.location)), None)
    recomputed = match is not None
    if match is not None:
        site, random = match, True
    return CheckResult(
        Kind.NONDETERMINISM, Status.FAIL, input=changed.name,
        location=site.location if site else None,
        evidence=BackwardNondeterministic(name, changed.name, site.name if site else None,
                                          random, others, recomputed))
