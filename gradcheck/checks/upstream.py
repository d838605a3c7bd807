"""The upstream check: a warning when a supplied upstream hides errors."""

from __future__ import annotations

import numpy as np

from gradcheck.checks.context import CheckContext
from gradcheck.evidence.gradients import AllOnesUpstream
from gradcheck.report import CheckResult, Kind, Status


def check_upstreams(ctx: CheckContext) -> list[CheckResult]:
    if not ctx.wants(Kind.UPSTREAM):
        return []
    return [CheckResult(Kind.UPSTREAM, Status.WARN, evidence=AllOnesUpstream(),
                        output=ctx.outputs[k].name)
            for u, k in zip(ctx.upstreams, ctx.diff_outputs) if u.size > 1 and np.all(u == 1.0)]
