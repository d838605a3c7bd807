"""A user's file named like a module gradcheck needs (a standard-library module, TensorFlow,
NumPy, Keras) that Python imported in its place: which file, and the sentence that says so.
Imports nothing beyond os and sys, so that it still works when such a file breaks the rest."""

from __future__ import annotations

import os
import sys

# Installed packages gradcheck imports by these names (a tensorflow.py shadows TensorFlow).
PACKAGES = ("tensorflow", "numpy", "keras")
_STDLIB = os.path.dirname(os.path.abspath(os.__file__)) + os.sep
_INSTALLED = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
# gradcheck's own targets/keras.py and render/html.py, in a source or editable install.
_GRADCHECK = os.path.dirname(os.path.abspath(__file__)) + os.sep


def shadowed_name(filename: str | None) -> str | None:
    """The module name `filename` takes from a standard-library module or a package
    gradcheck needs (a package's `__init__.py` by its folder's name), else None."""
    if not filename or filename.startswith("<"):
        return None
    path = os.path.abspath(filename)
    if path.startswith((_STDLIB, _GRADCHECK)) or any(marker in path for marker in _INSTALLED):
        return None
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem == "__init__":
        stem = os.path.basename(os.path.dirname(path))
    if stem in sys.stdlib_module_names or stem in PACKAGES:
        return stem
    return None


def _traceback_files(exc: BaseException) -> list[str]:
    files = []
    tb = exc.__traceback__
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    return files


def shadowing_file(exc: BaseException | None) -> tuple[str, str] | None:
    """(file, module name) of the first shadowing file in the traceback of `exc`, or
    imported in the place of a module gradcheck needs, else None."""
    files = _traceback_files(exc) if exc is not None else []
    files += [getattr(module, "__file__", None) or "" for name, module in list(sys.modules.items())
              if name in sys.stdlib_module_names or name in PACKAGES]
    for filename in files:
        name = shadowed_name(filename)
        if name is not None:
            return filename, name
    return None


def sentence(filename: str, name: str) -> str:
    where = os.path.relpath(filename) if not os.path.relpath(filename).startswith("..") \
        else filename
    if os.path.basename(filename) == "__init__.py":
        where = os.path.dirname(where)
    what = "the installed package" if name in PACKAGES else "the standard library's module"
    return f"{where} shadows {what} {name}: rename it"


def explain_import_failure(exc: BaseException) -> None:
    """gradcheck itself could not be imported: when a shadowing file is why, say so (exit 2
    from the command line, an ImportError naming the file from Python)."""
    found = shadowing_file(exc)
    if found is None:
        return
    message = sentence(*found)
    program = sys.argv[0] if sys.argv else ""
    if program == "-m" or os.path.basename(program) == "gradcheck" \
            or program.endswith(os.path.join("gradcheck", "__main__.py")):  # the command line
        sys.stderr.write(f"Error: {message}\n")
        raise SystemExit(2)
    raise ImportError(message) from exc
