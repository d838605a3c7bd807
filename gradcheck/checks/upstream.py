"""The upstream check: a warning when a supplied upstream hides errors."""

from __future__ import annotations

import numpy as np

from gradcheck.checks.context import CheckContext
from gradcheck.report import CheckResult, Kind, Status


def check_upstreams(ctx: CheckContext) -> list[CheckResult]:
    if not ctx.wants(Kind.UPSTREAM):
        return []
    return [CheckResult(
        Kind.UPSTREAM, Status.WARN,
        f"the upstream for {ctx.outputs[k].name} is all ones: uᵀJ is then the column sums of"
        " J, which hides transposed or mixed-up rows; a random upstream (the default) catches"
        " them", output=ctx.outputs[k].name)
        for u, k in zip(ctx.upstreams, ctx.diff_outputs) if u.size > 1 and np.all(u == 1.0)]
