"""Find the user's own source line in a traceback or a stack (not TensorFlow's, not ours)."""

from __future__ import annotations

import os
import re
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path

from gradcheck.evidence import Location
from gradcheck.user_code import is_user_file


def relative_path(path: str | os.PathLike[str]) -> str:
    """`path` relative to the current directory when it lies under it."""
    resolved = Path(path).resolve()
    try:
        return str(resolved.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def notebook_cell(filename: str) -> int | None:
    """The execution count of the Jupyter cell IPython compiled as `filename` (a file such as
    /tmp/ipykernel_1234/2891.py), when this process runs IPython; else None."""
    get_ipython = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)
    shell = get_ipython()
    label = getattr(getattr(shell, "compile", None), "format_code_name", lambda _: None)(filename)
    found = re.fullmatch(r"In\[(\d+)\]", label[1]) if label else None
    return int(found.group(1)) if found else None


def format_location(filename: str, line: int | None) -> Location:
    """The place `filename`:`line` (relative to the current directory when under it; a
    notebook cell's as the cell)."""
    return Location(relative_path(filename), line or None, notebook_cell(filename))


def innermost_user_frame(frames: Iterable[traceback.FrameSummary]) -> Location | None:
    user = [frame for frame in frames if is_user_file(frame.filename)]
    return format_location(user[-1].filename, user[-1].lineno) if user else None


# tf.function re-raises errors from traced code with the user's frames in the message.
_QUOTED_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def exception_location(exc: BaseException) -> Location | None:
    """The place of the innermost user frame of an exception's traceback (or, for an error
    from traced code, of the frames its message quotes; or the one it carries)."""
    carried = getattr(exc, "location", None)
    if isinstance(carried, Location):
        return carried
    frames = traceback.extract_tb(exc.__traceback__)
    found = innermost_user_frame(frames)
    quoted = [(name, int(line)) for name, line in _QUOTED_FRAME.findall(str(exc))
              if is_user_file(name)]
    # Raised inside AutoGraph's rewrite of the user's code (a Keras 2 layer's call() as a
    # functional model is built): the user's line is the one the message quotes, deeper than
    # the frame that called the layer.
    rewritten = bool(frames) and "__autograph_generated" in frames[-1].filename
    if found is not None and not (rewritten and quoted):
        return found
    return format_location(*quoted[-1]) if quoted else None
