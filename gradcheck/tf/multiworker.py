"""MultiWorkerMirroredStrategy over N local worker processes (TF_CONFIG on localhost, free
ports): each takes its share of f's batch, the gradients are summed across the workers as the
strategy's all-reduce does, and the first worker hands the sum back. Run as a module, this is
one such worker. Workers are stopped on every way out (an error, a time-out, Ctrl-C)."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gradcheck.errors import FunctionError
from gradcheck.tf.arrays import as_array
from gradcheck.tf.runtime import configure, imported, tensorflow

JOB, RESULT = "job.pickle", "summed.npz"


def free_ports(count: int) -> list[int]:
    """COUNT ports nothing listens on now (the system's choice, all bound at once)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for bound in sockets:
            bound.bind(("localhost", 0))
        return [bound.getsockname()[1] for bound in sockets]


def loss_gradients(function: Any, args: Sequence[Any], kwargs: dict[str, Any]
                   ) -> tuple[list[Any], list[Any]]:
    """(the trainable variables f reads, in reading order; the gradient of the sum of f's
    floating outputs for them)."""
    tf = tensorflow()
    with tf.GradientTape() as tape:
        leaves = [y for y in tf.nest.flatten(function(*args, **kwargs))
                  if getattr(y, "dtype", None) is not None and y.dtype.is_floating]
        total = tf.add_n([tf.reduce_sum(y) for y in leaves])
    variables = [v for v in tape.watched_variables() if v.trainable]
    return variables, tape.gradient(total, variables)


def _portable(value: Any) -> Any:
    """A tensor as its array (a Keras model pickles itself, with its weights)."""
    return np.asarray(as_array(value)) if hasattr(value, "numpy") and not callable(value) \
        else value


def _shard(args: Sequence[Any], batch: Sequence[int], index: int, count: int) -> list[Any]:
    return [np.split(np.asarray(a), count)[index] if i in batch else a
            for i, a in enumerate(args)]


@contextlib.contextmanager
def _started(commands: Sequence[list[str]], environments: Sequence[dict[str, str]]
             ) -> Iterator[list[subprocess.Popen[bytes]]]:
    workers: list[subprocess.Popen[bytes]] = []
    try:
        for command, environment in zip(commands, environments):
            workers.append(subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.PIPE, start_new_session=True))
        yield workers
    finally:  # an error, a time-out, Ctrl-C: no worker outlives the check
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
            worker.wait()
            if worker.stderr is not None:
                worker.stderr.close()


def multiworker_sum(function: Any, args: Sequence[Any], kwargs: dict[str, Any],
                    batch: Sequence[int], workers: int, timeout: float = 300.0
                    ) -> list[np.ndarray]:
    """The gradient MultiWorkerMirroredStrategy sums over WORKERS local processes, each on
    its share of the batch arguments (indices BATCH), per variable in loss_gradients' order."""
    ports = free_ports(workers)
    cluster = {"worker": [f"localhost:{port}" for port in ports]}
    with tempfile.TemporaryDirectory(prefix="gradcheck-multiworker-") as folder:
        job = ([_portable(a) for a in args], {k: _portable(v) for k, v in kwargs.items()})
        (Path(folder) / JOB).write_bytes(pickle.dumps((function, *job, list(batch), workers)))
        path = os.pathsep.join(p for p in sys.path if p)
        environments = [{**os.environ, "PYTHONPATH": path, "CUDA_VISIBLE_DEVICES": "-1",
                         "TF_CPP_MIN_LOG_LEVEL": "3", "TF_CONFIG": json.dumps(
                             {"cluster": cluster, "task": {"type": "worker", "index": i}})}
                        for i in range(workers)]
        command = [sys.executable, "-m", "gradcheck.tf.multiworker", folder]
        with _started([command + [str(i)] for i in range(workers)], environments) as started:
            for worker in started:
                try:
                    _, error = worker.communicate(timeout=timeout)
                except subprocess.TimeoutExpired:
                    raise FunctionError(f"a MultiWorkerMirroredStrategy worker took more than"
                                        f" {timeout:g} s") from None
                if worker.returncode:
                    last = (error or b"").decode(errors="replace").strip().splitlines()
                    raise FunctionError("a MultiWorkerMirroredStrategy worker failed: "
                                        + (last[-1] if last else f"exit {worker.returncode}"))
        with np.load(Path(folder) / RESULT) as summed:
            return [summed[f"g{i}"] for i in range(len(summed.files))]


def _work(folder: str, index: int) -> None:
    configure(1)
    # Before any op runs (unpickling the job may import the user's module, which may run some):
    # the collective ops are configured when TensorFlow starts.
    strategy = imported().distribute.MultiWorkerMirroredStrategy()
    tf = tensorflow()
    function, args, kwargs, batch, count = pickle.loads((Path(folder) / JOB).read_bytes())
    mine = _shard(args, batch, index, count)

    def step() -> list[Any]:
        variables, gradients = loss_gradients(function, mine, kwargs)
        return [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                for v, g in zip(variables, gradients)]

    per_replica = strategy.run(step)
    summed = [strategy.reduce(tf.distribute.ReduceOp.SUM, g, axis=None) for g in per_replica]
    if index == 0:
        np.savez(Path(folder) / RESULT, **{f"g{i}": np.asarray(as_array(g))
                                           for i, g in enumerate(summed)})


if __name__ == "__main__":
    _work(sys.argv[1], int(sys.argv[2]))
