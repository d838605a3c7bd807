"""The hessian check (`gradcheck hessian`): the Hessian of a scalar f, every (argument,
argument) block by nested tapes against central differences of the gradient (Hessian-vector
products ⟨w, H v⟩ in fast mode), and its symmetry."""

from __future__ import annotations

import numpy as np

from gradcheck.checks.context import CheckContext, Findings
from gradcheck.engine.program import function_name
from gradcheck.errors import InputError
from gradcheck.evidence.notes import HessianArgumentsOnly
from gradcheck.kinds.hessian.evidence import NoArgument
from gradcheck.kinds.second_order.check import (
    Differentiated,
    argument_rows,
    differentiate_gradient,
)
from gradcheck.report import Kind, Status


def require_scalar(ctx: CheckContext) -> None:
    """A Hessian needs one scalar output: anything else is a usage error (exit 2)."""
    outputs = [ctx.outputs[k] for k in ctx.diff_outputs]
    if len(outputs) == 1 and int(np.prod(outputs[0].shape, dtype=np.int64)) == 1:
        return
    returned = ", ".join(f"{o.name} of shape {o.shape}" for o in outputs)
    raise InputError(
        f"gradcheck hessian needs a scalar output, but {function_name(ctx.program.function)}"
        f" returns {returned}: reduce it to a scalar (e.g. tf.reduce_sum), or check the"
        " derivative of its VJP with `gradcheck check --order 2`")


def check_hessian(ctx: CheckContext) -> Findings:
    """Every block ∂²y/∂xᵢ∂xⱼ of the arguments (u = 1: the Hessian of y itself)."""
    require_scalar(ctx)
    output = ctx.outputs[ctx.diff_outputs[0]]
    names = {i: f"d{output.name}/d{ctx.program.slots[i].name}" for i in argument_rows(ctx)}
    if not names:
        found = Findings()
        found.add(Kind.HESSIAN, Status.SKIP, evidence=NoArgument())
        return found
    found = differentiate_gradient(
        ctx, Differentiated(Kind.HESSIAN, (np.ones(output.shape),), names))
    left = [s.name for i, s in enumerate(ctx.program.slots) if s.differentiable and i not in names]
    if left:
        found.notes.append(HessianArgumentsOnly(tuple(left)))
    return found
