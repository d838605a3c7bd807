"""The second-order check: the derivative of the VJP g(x) = Σₖ uₖᵀJₖ(x) by nested tapes,
against central differences of g (custom gradients whose grad_fn is not differentiable)."""

from __future__ import annotations

import numpy as np

from gradcheck.checks.context import CheckContext, Findings, shown
from gradcheck.checks.verdicts import comparison_fields
from gradcheck.numerics import differences, judging
from gradcheck.numerics.mistakes import value_mistake
from gradcheck.report import Cause, Kind, Status
from gradcheck.tf.program import Slot, first_line

# Above this many elements an input's second derivative is not checked element by element.
SECOND_ORDER_SIZE = 512
FIX = ("write grad_fn in TensorFlow ops of x and upstream (no .numpy(), NumPy, tf.Variable or"
       " tf.stop_gradient), or nest a tf.custom_gradient for the second order")


def _vjp_differences(ctx: CheckContext, index: int, slot: Slot
                     ) -> differences.FiniteDifference:
    """Central differences (x±h, x±2h) of g along every element."""
    x = ctx.program.value_of(index)
    h = differences.step_sizes(x, ctx.program.compute_dtype, ctx.options.eps)
    points = differences.points_along(x, h, np.arange(x.size))

    def g(point: np.ndarray) -> np.ndarray:
        value = ctx.recording.vjp_at(index, point, ctx.diff_outputs, ctx.upstreams)
        return np.zeros(slot.shape) if value is None else value

    return differences.finite_difference(np.stack([g(p) for p in points]), g(x), h,
                                         ctx.tolerance_dtype)


def _check_one(ctx: CheckContext, index: int, slot: Slot) -> Findings:
    found = Findings()
    where = {"input": slot.name}
    try:
        has_gradient, block = ctx.recording.vjp_jacobian(index, ctx.diff_outputs, ctx.upstreams)
        fd = _vjp_differences(ctx, index, slot) if has_gradient else None
    except Exception as exc:  # a grad_fn whose own gradient raises: a finding
        found.add(Kind.SECOND_ORDER, Status.FAIL,
                  f"differentiating the VJP for {slot.name} raised {first_line(exc)}; {FIX}",
                  cause=Cause("second-order-raised", first_line(exc), fix=FIX), **where)
        return found
    if fd is None:
        found.add(Kind.SECOND_ORDER, Status.SKIP,
                  f"no first-order gradient for {slot.name} to differentiate", **where)
        return found
    if block is None:
        if judging.is_negligible(fd.jacobian, fd.error_estimate, ctx.tolerance):
            found.add(Kind.SECOND_ORDER, Status.PASS,
                      f"the second derivative for {slot.name} is None and finite differences"
                      " of the VJP agree it is zero", **where)
        else:
            found.add(Kind.SECOND_ORDER, Status.FAIL,
                      f"the derivative of the VJP for {slot.name} is None (the gradient of the"
                      " gradient is cut), but the VJP changes with it (|∂g/∂x| up to"
                      f" {float(np.max(np.abs(fd.jacobian))):.3g}); {FIX}",
                      details={"finite_difference": shown(fd.jacobian)},
                      cause=Cause("second-order-none", "is not differentiable (the gradient"
                                  " of its result is None)", fix=FIX), **where)
        return found
    comparison = judging.compare(block, fd.jacobian, ctx.tolerance, fd.error_estimate)
    details = {"autodiff": shown(block), "finite_difference": shown(fd.jacobian)}
    if comparison.ok:
        found.add(Kind.SECOND_ORDER, Status.PASS,
                  f"∂(uᵀJ)/∂{slot.name} from nested tapes matches central differences of the"
                  f" VJP (max abs err {comparison.max_abs_err:.1e})",
                  details=details, **comparison_fields(comparison), **where)
        return found
    mistake = value_mistake(block, fd.jacobian, int(np.prod(slot.shape)), 1, slot.name,
                            max(1e-6, ctx.tolerance.rtol))
    found.add(Kind.SECOND_ORDER, Status.FAIL,
              f"∂(uᵀJ)/∂{slot.name} from nested tapes differs from central differences of the"
              f" VJP in {comparison.n_bad} of {comparison.size} elements"
              f" ({comparison.excess:.3g}× the allowed error): the second derivative"
              f" {mistake.what}; {FIX}", details=details,
              cause=Cause(mistake.kind, f"has a second derivative that {mistake.what}",
                          fix=FIX),
              **comparison_fields(comparison), **where)
    return found


def check_second_order(ctx: CheckContext) -> Findings:
    """For each argument (not too large): the Jacobian of its VJP, both ways."""
    found = Findings()
    for index, slot in enumerate(ctx.program.slots):
        if not (slot.differentiable and slot.argument) or slot.is_variable:
            continue
        if int(np.prod(slot.shape)) > SECOND_ORDER_SIZE:
            found.add(Kind.SECOND_ORDER, Status.SKIP,
                      f"{slot.name} has over {SECOND_ORDER_SIZE} elements: its second"
                      " derivative is not checked element by element", input=slot.name)
            continue
        found.extend(_check_one(ctx, index, slot))
    return found
