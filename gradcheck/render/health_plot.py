"""The health picture of a snapshot: each weight's gradient norm over the recorded steps, the
failing step marked (matplotlib, when installed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


def plot_health(path: Path, names: Sequence[str], steps: np.ndarray, norms: np.ndarray,
                failing_step: int) -> bool:
    """Write the PNG; False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
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
    partial = path.with_name(path.name + ".partial")
    figure.savefig(partial, format="png", dpi=100)
    plt.close(figure)
    partial.replace(path)
    return True
