"""Lazy, quiet TensorFlow import: the only door through which gradcheck reaches TensorFlow."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def silenced_stderr_fd() -> Iterator[None]:
    """TensorFlow's C++ chatter goes to file descriptor 2: hide it (start-up, or attempts
    that gradcheck expects may fail, such as a tape used twice)."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        yield
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), fd)
            yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def tensorflow() -> Any:
    """Import TensorFlow once, without its start-up log lines."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with silenced_stderr_fd():
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")
        tf.constant(0.0) + 0.0  # device start-up logs its own lines on the first op

    return tf
