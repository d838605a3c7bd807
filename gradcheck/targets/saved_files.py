"""TARGETs that are saved models: a SavedModel directory (`DIR`, `DIR:ATTR`) or a `.keras`
file (no TensorFlow here: only which files the TARGET names)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from gradcheck.errors import LoadError
from gradcheck.targets.modules import split_spec

SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
KERAS_SUFFIX = ".keras"


@dataclass(frozen=True)
class SavedTarget:
    """A saved model to load: `path`, and the attribute or signature to call (None: its
    `__call__`, else its `serving_default` signature); `keras`: a .keras file."""

    path: str
    attribute: str | None = None
    keras: bool = False

    @property
    def name(self) -> str:
        return self.attribute or os.path.basename(os.path.normpath(self.path))


def _is_saved_model(directory: str) -> bool:
    return any(os.path.isfile(os.path.join(directory, name)) for name in SAVED_MODEL_FILES)


def _not_saved_model(spec: str, directory: str) -> LoadError:
    return LoadError(f"TARGET {spec!r}: directory {directory!r} is not a SavedModel (it has no"
                     " saved_model.pb); save one with tf.saved_model.save or model.export, or"
                     " name a function as 'module:function' or 'path/to/file.py:function'")


def saved_target(spec: str) -> SavedTarget | None:
    """The saved model TARGET names, or None when it names a function (`module:attr`); a
    .keras file that is not there, or a directory that is not a SavedModel, is a LoadError."""
    text = spec.strip()
    if text.endswith(KERAS_SUFFIX):
        if not os.path.isfile(text):
            raise LoadError(f"TARGET {spec!r}: no such .keras file")
        return SavedTarget(text, keras=True)
    if os.path.isdir(text):
        if not _is_saved_model(text):
            raise _not_saved_model(spec, text)
        return SavedTarget(text)
    directory, colon, attribute = text.rpartition(":")
    if not colon or not directory or not attribute or directory.endswith(".py") \
            or not os.path.isdir(directory):
        return None  # a function's `module:attr` or `file.py:attr` (the loader says what fails)
    if _is_saved_model(directory):
        return SavedTarget(directory, attribute)
    if os.path.isfile(os.path.join(directory, "__init__.py")):
        return None  # a package's `module:attr`
    raise _not_saved_model(spec, directory)


def validate_target(spec: str) -> None:
    """A LoadError when TARGET is neither a saved model nor a well-formed `module:attr`."""
    if saved_target(spec) is None:
        split_spec(spec)
