"""The jvp check: forward-mode JVPs against reverse-mode VJPs through ⟨u, Jv⟩ = ⟨Jᵀu, v⟩."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gradcheck.numerics.tolerances import machine_eps
from gradcheck.report import Kind, Status
from gradcheck.tf.program import first_line, flatten_outputs
from gradcheck.tf.runtime import tensorflow

if TYPE_CHECKING:
    from gradcheck.checks.run import Checker
    from gradcheck.tf.program import Slot

# Both sides are autodiff, with no finite differences: they may differ by rounding only,
# allowed as this many machine epsilons of the sum of the terms' magnitudes.
JVP_ROUNDING = 300.0


def check_jvp(checker: Checker) -> None:
    """One random tangent v per input: Σₖ⟨uₖ, Jₖv⟩ (forward mode) against ⟨Σₖ Jₖᵀuₖ, v⟩."""
    rng = np.random.default_rng(checker.options.seed + 7919)
    for slot_index, slot in enumerate(checker.program.slots):
        if slot.differentiable:
            _check_one(checker, slot_index, slot, rng)


def _check_one(checker: Checker, slot_index: int, slot: Slot, rng: np.random.Generator) -> None:
    tf = tensorflow()
    outputs = checker.diff_outputs
    upstreams = [rng.standard_normal(checker.outputs[k].shape) for k in outputs]
    tangent = rng.standard_normal(slot.shape)
    where = {"input": slot.name,
             "output": checker.outputs[outputs[0]].name if len(outputs) == 1 else None}
    reverse = checker.recording.gradient(outputs, slot, upstreams)
    if reverse.error is not None or (reverse.value is not None and reverse.shape != slot.shape):
        checker.findings.add(Kind.JVP, Status.SKIP,
                             f"no reverse-mode VJP for {slot.name} to compare"
                             " with (see the checks above)", **where)
        return
    try:
        checker.program.announce(f"the forward-mode JVP (tf.autodiff.ForwardAccumulator) for"
                                 f" {slot.name}")
        with tf.autodiff.ForwardAccumulator(
                slot.value, tf.constant(tangent, dtype=slot.dtype)) as accumulator:
            leaves = flatten_outputs(checker.program.call())
            jvps = [accumulator.jvp(leaves[k].tensor) for k in outputs]
    except Exception as exc:  # forward mode is not defined for every op
        checker.findings.add(Kind.JVP, Status.SKIP, f"forward mode could not run for {slot.name}:"
                             f" {first_line(exc)}", **where)
        return
    # A JVP may come back as IndexedSlices (gather, segment ops): densify it.
    forward_terms = [u * np.asarray(tf.convert_to_tensor(j), dtype=np.float64)
                     for u, j in zip(upstreams, jvps) if j is not None]
    reverse_terms = (np.zeros(slot.shape) if reverse.value is None
                     else reverse.value * tangent)
    forward = float(sum(np.sum(t) for t in forward_terms))
    backward = float(np.sum(reverse_terms))
    scale = max(float(sum(np.sum(np.abs(t)) for t in forward_terms)),
                float(np.sum(np.abs(reverse_terms))))
    eps = machine_eps(checker.tolerance_dtype)
    # Tolerances the user gave explicitly also bound how far the two modes may differ.
    given = checker.options
    accepted = (given.rtol or 0.0) * scale + (given.atol or 0.0) * float(
        np.sum(np.abs(tangent)) * sum(np.sum(np.abs(u)) for u in upstreams))
    allowed = JVP_ROUNDING * eps * scale + accepted + np.finfo(np.float64).tiny
    error = abs(forward - backward)
    details = {"forward": forward, "reverse": backward, "allowed": allowed}
    if all(j is None for j in jvps) and reverse.value is None:
        checker.findings.add(Kind.JVP, Status.PASS,
                             f"forward and reverse mode agree that the outputs"
                             f" do not depend on {slot.name}", details=details, **where)
        return
    if error <= allowed:
        checker.findings.add(
            Kind.JVP, Status.PASS,
            f"forward mode ⟨u, Jv⟩ = {forward:.6g} matches reverse mode ⟨Jᵀu, v⟩ ="
            f" {backward:.6g} for a random v and u", max_abs_err=error,
            max_rel_err=error / scale if scale else 0.0, excess=error / allowed,
            details=details, **where)
        return
    checker.findings.add(
        Kind.JVP, Status.FAIL,
        f"forward mode (ForwardAccumulator) gives ⟨u, Jv⟩ = {forward:.6g} but reverse mode"
        f" (tape.gradient) gives ⟨Jᵀu, v⟩ = {backward:.6g} for {slot.name}: the two modes"
        " disagree, so a gradient (often a custom_gradient grad_fn) is inconsistent",
        max_abs_err=error, max_rel_err=error / scale if scale else None,
        excess=error / allowed, details=details,
        **where)
