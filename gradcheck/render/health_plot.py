"""The health picture of a snapshot: each weight's gradient norm over the recorded steps, the
failing step marked (matplotlib, when installed)."""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np


def plot_health(names: Sequence[str], steps: np.ndarray, norms: np.ndarray,
                failing_step: int) -> bytes | None:
    """The PNG; None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for index, name in enumerate(names):
        values = np.asarray(norms[:, index], np.float64)
        axes.semilogy(steps, np.where(values > 0, values, np.nan), label=name, linewidth=1)
    axes.axvline(failing_step, color="red", linestyle="--", label=f"step {failing_step}")
    axes.set_xlabel("training step")
    axes.set_ylabel("gradient norm")
    axes.set_title("per-weight gradient norms before the failing step")
    axes.legend(fontsize="x-small", loc="best")
    figure.tight_layout()
    png = io.BytesIO()
    figure.savefig(png, format="png", dpi=100)
    plt.close(figure)
    return png.getvalue()
