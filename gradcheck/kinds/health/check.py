"""The health check: per-weight gradient norms and zero fractions of the last training steps
(recorded by gradcheck.Watch with health=True), as findings."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gradcheck.kinds.health.evidence import GradientHealth
from gradcheck.kinds.health.judging import judge_health
from gradcheck.report import CheckResult, Kind, Status


def health_results(names: Sequence[str], norms: np.ndarray, zeros: np.ndarray
                   ) -> list[CheckResult]:
    """One finding per weight: a warning when vanishing, exploding or dead."""
    return [CheckResult(Kind.HEALTH, Status.PASS if state == "healthy" else Status.WARN,
                        input=name, evidence=GradientHealth(state=state, **figures))
            for name, (state, figures) in zip(names, judge_health(norms, zeros))]
