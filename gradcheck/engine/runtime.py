"""Lazy, quiet TensorFlow import: the only door through which gradcheck reaches TensorFlow."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

from gradcheck.errors import UsageError

TENSORFLOW_MISSING = (
    "gradcheck needs TensorFlow, which is not installed here: pip install tensorflow (or"
    " tensorflow-cpu, tensorflow-macos, tf-nightly), or install gradcheck with its tensorflow"
    " extra (pip install '.[tensorflow]' in its clone)")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


_PFOR = os.path.join("parallel_for", "pfor.py")


class _OwnMachinery(logging.Filter):
    """Drops what TensorFlow logs about gradcheck's own machinery when gradcheck's code is on
    the stack: "triggered tf.function retracing" (its checks trace f and its VJP afresh on
    purpose) and pfor's conversion errors, op dumps included (it tries vectorisation first and
    falls back, saying so, where that fails). The user's own stay."""

    def filter(self, record: logging.LogRecord) -> bool:
        if ("triggered tf.function retracing" not in str(record.msg)
                and not record.pathname.endswith(_PFOR)):
            return True
        frame = sys._getframe(1)
        while frame is not None:
            name = frame.f_code.co_filename
            if name.startswith(_PACKAGE) and name != __file__:
                return False
            frame = frame.f_back  # type: ignore[assignment]
        return True


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
        os.dup2(_devnull(), fd)
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


@functools.cache
def _devnull() -> int:
    """A descriptor open on the null device, opened once per process."""
    return os.open(os.devnull, os.O_WRONLY)


@contextlib.contextmanager
def variable_scope_kept() -> Iterator[None]:
    """Restore the global variable scope's caching device on the way out. tf.scan, tf.foldl and
    the v1 RNNs set one while they trace their loop body and clear it only if the body returns,
    so a trace that raises (gradcheck traces f on purpose: tf.function, XLA) would leave it set,
    and every later eager tf.recompute_grad in the process would raise "Caching devices is not
    yet supported when eager execution is enabled"."""
    scope = tensorflow().compat.v1.get_variable_scope()
    device = scope.caching_device
    try:
        yield
    finally:
        if scope.caching_device is not device:
            scope._caching_device = device  # set_caching_device refuses to run eagerly


def eager_disabled() -> bool:
    """Whether eager execution is off (tf.compat.v1.disable_eager_execution())."""
    return not bool(tensorflow().executing_eagerly())


def enable_eager_again() -> None:
    """Undo tf.compat.v1.disable_eager_execution() in a worker process, which goes on checking
    other TARGETs (TensorFlow's enable_eager_execution refuses once graphs exist)."""
    from tensorflow.python.eager import context

    if not context.executing_eagerly():
        context.default_execution_mode = context.EAGER_MODE
        context.context()._thread_local_data.is_eager = True


def imported() -> Any:
    """Import TensorFlow once, without its start-up log lines, and run nothing: a process that
    has run no TensorFlow op can still be forked safely (the fork server of
    gradcheck.processes.supervisor relies on it)."""
    if "tensorflow" not in sys.modules:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        with silenced_stderr_fd():
            try:
                import tensorflow as tf
            except ModuleNotFoundError as exc:
                if exc.name != "tensorflow":
                    raise
                raise UsageError(TENSORFLOW_MISSING) from None

            tf.get_logger().setLevel("ERROR")
    tf = sys.modules["tensorflow"]
    logger = tf.get_logger()
    if not any(isinstance(f, _OwnMachinery) for f in logger.filters):
        logger.addFilter(_OwnMachinery())
    return tf


_started = False


def configure(threads: int | None) -> None:
    """Cap TensorFlow's thread pools before it starts (running no op, so that the user's module
    may still set up its logical devices or memory growth when imported)."""
    tf = imported()
    if threads is not None and not _started:
        with contextlib.suppress(RuntimeError):  # started by someone else already
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)


def tensorflow(threads: int | None = None) -> Any:
    """TensorFlow, imported and started quietly (its devices log their own lines on the first
    op); `threads`, on the first call only, caps its thread pools."""
    global _started
    if _started:
        return sys.modules["tensorflow"]
    tf = imported()
    configure(threads)
    with silenced_stderr_fd():
        tf.constant(0.0) + 0.0
    _started = True
    return tf


@contextlib.contextmanager
def functions_eager(eager: bool) -> Iterator[None]:
    """tf.function bodies run eagerly (True: custom gradients inside them see concrete
    tensors) or are traced (False: even where f's module called
    tf.config.run_functions_eagerly(True) at import, under which a compiled check would compare
    the eager VJP with itself) inside the block; the setting is restored afterwards."""
    tf = tensorflow()
    previous = tf.config.functions_run_eagerly()
    if previous != eager:
        tf.config.run_functions_eagerly(eager)
    try:
        yield
    finally:
        if previous != eager:
            tf.config.run_functions_eagerly(previous)
