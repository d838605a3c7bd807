"""Per-dtype machine epsilons and default tolerances (NumPy only)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MACHINE_EPS = {
    "float16": float(np.finfo(np.float16).eps),
    "bfloat16": 2.0**-7,
    "float32": float(np.finfo(np.float32).eps),
    "float64": float(np.finfo(np.float64).eps),
}
# How far FD error estimates are trusted: the verdict allows this many estimates.
ERROR_ESTIMATE_SAFETY = 4.0


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    # Allowed error relative to the block's largest |entry| (autodiff's own rounding).
    scale_rtol: float = 0.0
    # A column whose error estimate exceeds this fraction of the block's scale is retried
    # with smaller steps.
    resolution: float = 1e-2


DEFAULT_TOLERANCES = {
    "float64": Tolerance(atol=1e-8, rtol=1e-6),
    "float32": Tolerance(atol=1e-4, rtol=1e-3),
    "float16": Tolerance(atol=1e-2, rtol=1e-2),
    "bfloat16": Tolerance(atol=5e-2, rtol=5e-2),
}


def machine_eps(dtype: str) -> float:
    return MACHINE_EPS.get(dtype, MACHINE_EPS["float32"])


def tolerance_for(dtype: str, atol: float | None = None, rtol: float | None = None) -> Tolerance:
    default = DEFAULT_TOLERANCES.get(dtype, DEFAULT_TOLERANCES["float32"])
    return Tolerance(
        atol=default.atol if atol is None else atol, rtol=default.rtol if rtol is None else rtol
    )


# float32 finite differences with measured noise and three Richardson steps
# (numerics/float32.py): their error estimate, not rtol, carries the accuracy. The floors
# cover autodiff's own float32 rounding (measured up to 7e-7 of the block's scale on the
# real-world catalogue: eigh, igamma).
FLOAT32_DIFFERENCES = Tolerance(atol=1e-7, rtol=1e-5, scale_rtol=4e-6, resolution=2e-5)


def fd_tolerance(tolerance: Tolerance, dtype: str, atol: float | None,
                 rtol: float | None) -> Tolerance:
    """The tolerance of comparisons with full-mode finite differences: float32's own unless
    the user chose atol or rtol."""
    if dtype != "float32" or atol is not None or rtol is not None:
        return tolerance
    return FLOAT32_DIFFERENCES
