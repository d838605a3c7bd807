"""Why a path the user named cannot be read as a file: missing, a folder, a FIFO, a symlink
loop... (one wording for TARGET files, inputs and configurations)."""

from __future__ import annotations

import errno
import os
import stat


def not_a_regular_file(path: str | os.PathLike[str]) -> str | None:
    """'not found', 'is a folder, not a file', ... or None for a regular file."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "is a symlink to a missing file" if os.path.islink(path) else "not found"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symlink loop"
        return f"cannot be read: {exc.strerror or exc}"
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (named pipe), not a regular file"
    if not stat.S_ISREG(mode):
        return "is a device or socket, not a regular file"
    return None
