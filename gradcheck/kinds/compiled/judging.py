"""A compiled VJP judged against the eager one (NumPy only): f's outputs first, which must
agree for the VJPs to be comparable, then the VJPs with room for reassociated sums."""

from __future__ import annotations

import numpy as np

from gradcheck.numerics.judging import Comparison, compare, differ_beyond, finite_scale
from gradcheck.numerics.tolerances import Tolerance, machine_eps

# Compiled kernels reassociate sums: allow this many epsilons of the VJP's scale on top of
# the check's tolerance.
REASSOCIATION = 64.0


def output_differs(compiled: np.ndarray, eager: np.ndarray, tolerance: Tolerance) -> bool:
    """Whether an output f computes compiled differs from its eager value beyond `tolerance`."""
    return compiled.shape != eager.shape or bool(np.any(differ_beyond(
        compiled, eager, tolerance.atol + tolerance.rtol * finite_scale(eager))))


def judge_compiled(compiled: np.ndarray, eager: np.ndarray, tolerance: Tolerance,
                   dtype: str) -> Comparison:
    """The compiled VJP against the eager one. Compiled kernels reassociate sums and may use
    other algorithms (XLA's eigensolver): differences are judged against the block's scale, as
    finite differences would be."""
    scale = float(np.max(np.abs(eager), initial=0.0))
    return compare(compiled, eager, Tolerance(
        tolerance.atol + (tolerance.rtol + REASSOCIATION * machine_eps(dtype)) * scale,
        tolerance.rtol))
