"""Whose code a file is: the user's, gradcheck's own, the standard library's, an installed
package's or TensorFlow's (the one definition every stack walk and location uses)."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

GRADCHECK_DIR = Path(__file__).resolve().parent  # gradcheck itself
INSTALLED_MARKERS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
_LIBRARY_MARKERS = (*INSTALLED_MARKERS, f"{os.sep}lib{os.sep}python")
_EXAMPLES = f"{os.sep}_fixtures{os.sep}"  # the examples `gradcheck demo` installs: user code
_LIBRARIES = ("tensorflow", "keras", "tf_keras", "gradcheck")


def is_bundled_example(path: str) -> bool:
    """One of the examples installed inside the package (user code, though gradcheck's)."""
    return _EXAMPLES in path


def is_user_file(filename: str) -> bool:
    """The user's own source: not a pseudo-file nor autograph's rewrite of it, not gradcheck's
    (its bundled examples are the user's), not the standard library's nor an installed
    package's."""
    if filename.startswith("<") or "__autograph_generated" in filename:
        return False  # autograph's rewrite of the user's function, not their source
    resolved = str(Path(filename).resolve())
    if is_bundled_example(resolved):
        return True
    if resolved.startswith(str(GRADCHECK_DIR)):
        return False
    return not any(marker in resolved for marker in _LIBRARY_MARKERS)


def is_gradcheck_file(filename: str) -> bool:
    """gradcheck's own source (the bundled examples in it are the user's)."""
    return not is_user_file(filename) and Path(filename).resolve().is_relative_to(GRADCHECK_DIR)


@functools.cache
def _stdlib_directory() -> str:
    import sysconfig

    return str(Path(sysconfig.get_paths()["stdlib"]).resolve())


def is_stdlib_file(filename: str) -> bool:
    """The standard library's own source (not a package installed beside it)."""
    resolved = str(Path(filename).resolve())
    return resolved.startswith(_stdlib_directory()) and not any(
        marker.strip(os.sep) in resolved for marker in INSTALLED_MARKERS)


@functools.cache
def _directories_of(names: tuple[str, ...]) -> tuple[str, ...]:
    found = []
    for name in names:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path:
            found.append(os.path.dirname(os.path.abspath(path)) + os.sep)
    return tuple(found)


def _library_directories() -> tuple[str, ...]:
    """Where TensorFlow's own code lives (its custom gradients are not the user's), for the
    libraries imported so far (tf_keras may be imported after the first question)."""
    return _directories_of(tuple(name for name in _LIBRARIES if name in sys.modules))


@functools.cache
def _installed_directories() -> tuple[str, ...]:
    import sysconfig

    paths = sysconfig.get_paths()
    return tuple(dict.fromkeys(os.path.abspath(paths[key]) + os.sep
                               for key in ("purelib", "platlib") if key in paths))


def installed_package(filename: str) -> str | None:
    """The installed package (site-packages' top-level name) a file belongs to, if any."""
    path = os.path.abspath(filename)
    for directory in _installed_directories():
        if path.startswith(directory):
            return path[len(directory):].split(os.sep, 1)[0] or None
    return None


def is_installed(filename: str) -> bool:
    """Whether a file belongs to an installed package (site-packages), not the user's tree."""
    return os.path.abspath(filename).startswith(_installed_directories())


def is_library(filename: str) -> bool:
    """TensorFlow's, Keras' or gradcheck's own code (the bundled examples are the user's)."""
    path = os.path.abspath(filename)
    if is_bundled_example(path):
        return False
    return path.startswith(_library_directories())
