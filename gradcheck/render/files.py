"""The one writer of output files (-o, --save, --plot): a regular file is replaced atomically and
follows the umask; a symlink is written through, and a device or FIFO is written into, never
replaced; a file that cannot be written is an error, before the check runs when asked early."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from gradcheck.atomic import replace_file
from gradcheck.errors import UsageError

PathLike = str | os.PathLike[str]


def _cannot(path: PathLike, why: str) -> UsageError:
    return UsageError(f"cannot write {str(path)!r}: {why}")


def real_target(path: PathLike) -> Path:
    """Where writing PATH lands: a symlink's (final) target, which may not exist yet."""
    given = Path(path)
    try:
        return Path(os.path.realpath(given, strict=False))
    except (OSError, RuntimeError) as exc:  # a symlink loop on some Pythons
        raise _cannot(path, "it is a symlink loop") from exc


def _existing(target: Path, path: PathLike) -> os.stat_result | None:
    try:
        return target.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise _cannot(path, exc.strerror or str(exc)) from exc


def _nearest_existing(folder: Path) -> Path:
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def check_writable(path: PathLike, *, folder: bool = False, make_folders: bool = False) -> None:
    """Raise UsageError now if PATH (a file, or with `folder` a folder to create files in)
    could not be written later; nothing is created or changed. `make_folders`: missing
    folders on the way will be created."""
    target = real_target(path)
    status = _existing(target, path)
    if folder:
        if status is not None and not stat.S_ISDIR(status.st_mode):
            raise _cannot(path, "it is not a folder")
        _probe_folder(path, _nearest_existing(target))
        return
    if status is not None and stat.S_ISDIR(status.st_mode):
        raise _cannot(path, "it is a folder")
    if status is not None and not stat.S_ISREG(status.st_mode):
        if not os.access(target, os.W_OK):
            raise _cannot(path, "permission denied")
        return  # a device or FIFO: written into (opening a FIFO now would block)
    if not make_folders and not target.parent.is_dir():
        raise _cannot(path, f"the folder {str(target.parent)!r} does not exist")
    _probe_folder(path, _nearest_existing(target.parent))


def _probe_folder(path: PathLike, folder: Path) -> None:
    """Create and remove a file in FOLDER: the only test of writability that a read-only mount,
    a full quota or root's privileges cannot fool."""
    if not folder.is_dir():
        raise _cannot(path, f"{str(folder)!r} is not a folder")
    try:
        handle, probe = tempfile.mkstemp(prefix=".gradcheck-probe-", dir=folder)
    except OSError as exc:
        raise _cannot(path, exc.strerror or str(exc)) from exc
    os.close(handle)
    os.unlink(probe)


def write_file(path: PathLike, data: bytes, *, make_folders: bool = False) -> str:
    """Write DATA to PATH whole or not at all; return PATH as given. Raises UsageError."""
    target = real_target(path)
    status = _existing(target, path)
    try:
        if status is not None and not stat.S_ISREG(status.st_mode):
            if stat.S_ISDIR(status.st_mode):
                raise _cannot(path, "it is a folder")
            with open(target, "wb") as stream:  # a device or FIFO: no rename, no temporary
                stream.write(data)
            return str(path)
        if make_folders:
            target.parent.mkdir(parents=True, exist_ok=True)
        mode = stat.S_IMODE(status.st_mode) if status is not None else None
        replace_file(target, data, mode)
    except OSError as exc:
        raise _cannot(path, exc.strerror or str(exc)) from exc
    return str(path)
