"""The files behind --plot DIR and --save FILE.npz: the one writer the command line calls."""

from __future__ import annotations

import json
import os
from pathlib import Path

from gradcheck.render.blocks import skipped_blocks, slug
from gradcheck.render.files import write_file
from gradcheck.render.plot import render_pictures, require_matplotlib
from gradcheck.render.save import block_arrays, write_npz
from gradcheck.report import Report, RunResult, Status

PathLike = str | os.PathLike[str]


def require_plotting() -> None:
    """Raise UsageError ("--plot needs matplotlib: ...") now, before any check runs."""
    require_matplotlib()


def write_pictures(report: Report, plot_dir: PathLike) -> list[str]:
    """One PNG and one sidecar JSON per block, named OUTPUT-INPUT.png/.json, in PLOT_DIR."""
    folder = Path(plot_dir)
    written = []
    for picture in render_pictures(report):
        written.append(write_file(folder / f"{picture.stem}.png", picture.png, make_folders=True))
        sidecar = json.dumps(picture.sidecar, indent=1, allow_nan=False) + "\n"
        written.append(write_file(folder / f"{picture.stem}.json", sidecar.encode(),
                                  make_folders=True))
    return written


def write_artifacts(report: Report, plot_dir: PathLike | None = None,
                    save_file: PathLike | None = None) -> list[str]:
    """Write the pictures (--plot DIR) and the arrays (--save FILE.npz) of a report whose
    checks ran with CheckSettings(keep_blocks=True); return the paths written. Raises
    UsageError (exit 2) when matplotlib is missing or a file cannot be written."""
    written = []
    if plot_dir is not None:
        written += write_pictures(report, plot_dir)
    if save_file is not None:
        written.append(write_npz(save_file, block_arrays(report)))
    return written


def artifact_notes(report: Report) -> list[str]:
    """Why some failing (input, output) pairs have no picture (say them as notes)."""
    return skipped_blocks(report)


def write_run_artifacts(result: RunResult, plot_dir: PathLike) -> list[str]:
    """`gradcheck run --plot DIR`: the pictures of failing checks only, one folder per check
    (DIR/<check name>/OUTPUT-INPUT.png)."""
    written = []
    for outcome in result.outcomes:
        if outcome.status == Status.FAIL and outcome.report is not None:
            written += write_pictures(outcome.report, Path(plot_dir) / slug(outcome.name))
    return written
