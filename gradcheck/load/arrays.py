"""Reading .npy and .npz files the user names, safely: allow_pickle=False, headers checked
before NumPy allocates what they declare, NumPy's many ways of failing as one-line errors."""

from __future__ import annotations

import contextlib
import math
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from gradcheck.errors import InputError
from gradcheck.load.paths import not_a_regular_file
from gradcheck.spelling import format_size


def read_array_file(text: str, what: str) -> Any:
    """The array of a .npy file, or the dict of arrays of a .npz file, named by TEXT."""
    path = Path(text)
    why = not_a_regular_file(path)
    if why is not None:
        raise InputError(f"{what} file {text!r} {why}")
    _check_header(path, text, what)
    return _load_npz(path, what) if text.endswith(".npz") else _load_npy(path, what)


@contextlib.contextmanager
def _reading(path: Path, what: str) -> Iterator[None]:
    """Turn NumPy's many ways of failing on a bad file into one-line input errors."""
    try:
        yield
    except InputError:
        raise
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise InputError(
                f"{what} {str(path)!r} holds Python objects (pickled data); gradcheck loads"
                f" {path.suffix} files with allow_pickle=False: save numeric arrays"
            ) from exc
        text = str(exc)
        if "could only read" in text or "cannot reshape array" in text:
            text = "the file holds fewer elements than its header declares (truncated?)"
        raise InputError(f"cannot read {what} {str(path)!r}: {text}") from exc
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"cannot read {what} {str(path)!r}: {exc or 'empty file'}") from exc
    except MemoryError as exc:
        raise InputError(f"cannot read {what} {str(path)!r}: its arrays do not fit in"
                         " memory") from exc


def _load_npy(path: Path, what: str) -> np.ndarray:
    with _reading(path, what):
        array = np.load(path, allow_pickle=False)
    return numeric(array, f"{what} {str(path)!r}")


def _load_npz(path: Path, what: str) -> dict[str, np.ndarray]:
    with _reading(path, what), np.load(path, allow_pickle=False) as archive:
        return {key: numeric(archive[key], f"{what} {str(path)!r}[{key!r}]") for key in archive}


def numeric(array: np.ndarray, what: str) -> np.ndarray:
    if array.dtype == object or not (
        np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_
    ):
        raise InputError(f"{what} has dtype {array.dtype}; inputs must be numeric arrays")
    return array


def _check_header(path: Path, text: str, what: str) -> None:
    """Refuse empty files and files that are not .npy/.npz before NumPy guesses at them."""
    npz = text.endswith(".npz")
    try:
        with path.open("rb") as handle:
            head = handle.read(6)
    except OSError as exc:
        raise InputError(f"cannot read {what} file {text!r}: {exc.strerror or exc}") from exc
    if not head:
        raise InputError(f"{what} file {text!r} is empty (0 bytes)")
    if not head.startswith(b"PK" if npz else b"\x93NUMPY"):
        kind = "a .npz (zip) archive" if npz else "a .npy file (no NumPy header)"
        raise InputError(f"{what} file {text!r} is not {kind}; save it with"
                         f" numpy.{'savez' if npz else 'save'}")
    if not npz:
        _check_declared_size(path, text, what)


def _check_declared_size(path: Path, text: str, what: str) -> None:
    """A header that declares more data than the file holds is refused before NumPy
    allocates it (10^12 elements would be a MemoryError, or swap the machine)."""
    with _reading(path, what), path.open("rb") as handle:
        version = np.lib.format.read_magic(handle)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        shape, _, dtype = read_header(handle)
        declared = math.prod(shape) * dtype.itemsize
        held = path.stat().st_size - handle.tell()
    if dtype.hasobject or declared <= held:
        return
    raise InputError(f"cannot read {what} {str(path)!r}: its header declares shape {shape} of"
                     f" {dtype} ({format_size(declared)}) but the file holds"
                     f" {format_size(held)} of data (truncated?)")
