"""The one atomic file writer: a file written whole or not at all, through a temporary beside
it, then renamed over the name (replace_file) or linked to a name that must be free
(create_file)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from gradcheck.processes.trees import umask


def replace_file(target: Path, data: bytes, mode: int | None = None) -> None:
    """DATA into TARGET through a temporary file in the same folder, removed whatever happens;
    the file gets MODE (default: what a new file gets, 0o666 less the umask)."""
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                         dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temporary, 0o666 & ~umask() if mode is None else mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def create_file(target: Path, data: bytes, mode: int = 0o644) -> None:
    """DATA into TARGET, a name that must be free: never through a symlink, and a
    FileExistsError, rather than a replaced file, when the name is taken meanwhile."""
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                         | getattr(os, "O_NOFOLLOW", 0), mode)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
        os.link(partial, target)
    finally:
        os.unlink(partial)
