"""MultiWorkerMirroredStrategy over N local worker processes (TF_CONFIG on localhost, free
ports): each takes its share of f's batch, the gradients are summed across the workers as the
strategy's all-reduce does, and the first worker hands the sum back. Run as a module, this is
one such worker. Workers, and whatever they start, are stopped on every way out (an error, a
time-out, Ctrl-C, SIGTERM, the worker that started them killed); no more start than the machine
holds, and ports that cannot be had are an input error."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gradcheck.engine.arrays import as_array
from gradcheck.engine.runtime import configure, imported, tensorflow
from gradcheck.errors import FunctionError, InputError
from gradcheck.processes.trees import available_memory, become_subreaper, end_tree
from gradcheck.spelling import format_size

JOB, RESULT, ERRORS = "job.pickle", "summed.npz", "worker-{}.stderr"
# Resident memory of one worker process (TensorFlow, Keras, the strategy's gRPC server and
# collectives; measured at 750MiB with a small Keras model), and how many share a core before
# TensorFlow's start-up and the all-reduce slow to a crawl (each runs one op thread).
WORKER_MEMORY = 768 << 20
WORKERS_PER_CORE = 4
# A worker's exit code when it cannot write its result (sysexits' EX_IOERR).
CANNOT_WRITE = 74
# How often the workers are looked at while they run.
POLL_SECONDS = 0.05


def free_ports(count: int) -> list[int]:
    """COUNT ports nothing listens on now (the system's choice, all bound at once), on a
    localhost that answers; an InputError when the system cannot give them."""
    try:
        with contextlib.ExitStack() as stack:
            sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
            for bound in sockets:
                bound.bind(("localhost", 0))
            _reachable(sockets[0], stack)
            return [bound.getsockname()[1] for bound in sockets]
    except OSError as exc:
        raise InputError(
            f"--strategy multiworker:{count} needs {count} free TCP port"
            f"{'s' if count != 1 else ''} on localhost for its workers to reach each other:"
            f" {exc.strerror or exc}") from None


def _reachable(bound: socket.socket, stack: contextlib.ExitStack) -> None:
    """An OSError unless a connection to BOUND succeeds (the workers would otherwise wait for
    each other until their time-out, e.g. with the loopback interface down)."""
    bound.listen()
    client = stack.enter_context(socket.socket())
    client.settimeout(5.0)
    client.connect(bound.getsockname())


def worker_limit(cores: int, available: int | None) -> tuple[int, str]:
    """How many MultiWorkerMirroredStrategy workers this machine holds: each is a TensorFlow
    process of about WORKER_MEMORY that needs a share of a core; with why."""
    by_cores = WORKERS_PER_CORE * cores
    by_memory = by_cores if available is None else max(1, available // WORKER_MEMORY)
    why = (f"{cores} core{'s' if cores != 1 else ''}, at most {WORKERS_PER_CORE} workers each"
           if by_cores <= by_memory else
           f"{format_size(available or 0)} of memory available, about"
           f" {format_size(WORKER_MEMORY)} per worker")
    return min(by_cores, by_memory), why


def check_worker_count(count: int, cores: int | None = None,
                       available: int | None = None) -> None:
    """An InputError when COUNT workers are more than this machine holds (worker_limit)."""
    if cores is None:
        cores = usable_cores()
    if available is None:
        available = available_memory()
    limit, why = worker_limit(cores, available)
    if count > limit:
        raise InputError(f"--strategy multiworker:{count}: this machine holds at most {limit}"
                         f" worker process{'es' if limit != 1 else ''} ({why})")


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


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
def _started(commands: Sequence[list[str]], environments: Sequence[dict[str, str]],
             folder: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """The workers, each writing its stderr to a file in FOLDER (a pipe that fills would stop
    it), in this process's group (ended with it), and reading a pipe from this process that
    closes when it ends, however it ends (then the worker ends what it started, and itself)."""
    workers: list[subprocess.Popen[bytes]] = []
    try:
        for index, (command, environment) in enumerate(zip(commands, environments)):
            with open(folder / ERRORS.format(index), "wb") as errors:
                workers.append(subprocess.Popen(command, env=environment, stdin=subprocess.PIPE,
                                                stdout=subprocess.DEVNULL, stderr=errors))
        yield workers
    finally:  # an error, a time-out, Ctrl-C: no worker, nor what it started, outlives the check
        for worker in workers:
            end_tree(worker.pid, include_root=worker.poll() is None)
        for worker in workers:
            worker.wait()
            if worker.stdin is not None:
                worker.stdin.close()


def _write(path: Path, data: bytes) -> None:
    """DATA into PATH; an InputError when it cannot be written (a full disk)."""
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise InputError(f"--strategy multiworker: cannot write the workers' file {path}:"
                         f" {exc.strerror or exc}") from None


def _last_line(path: Path) -> str | None:
    with contextlib.suppress(OSError):
        lines = path.read_bytes()[-4096:].decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else None
    return None


def _wait(workers: Sequence[subprocess.Popen[bytes]], folder: Path, timeout: float) -> None:
    """Until every worker has ended well; a FunctionError as soon as one fails (the others
    would wait for it in the all-reduce), or at TIMEOUT."""
    deadline = time.monotonic() + timeout
    while True:
        codes = [worker.poll() for worker in workers]
        for index, code in enumerate(codes):
            if code == CANNOT_WRITE:
                raise InputError(_last_line(folder / ERRORS.format(index)) or (
                    f"--strategy multiworker: cannot write the workers' file {folder / RESULT}"
                    " (is its disk full?)"))
            if code:
                last = _last_line(folder / ERRORS.format(index))
                raise FunctionError("a MultiWorkerMirroredStrategy worker failed: "
                                    + (last or f"exit {code}"))
        if all(code == 0 for code in codes):
            return
        if time.monotonic() >= deadline:
            raise FunctionError(f"a MultiWorkerMirroredStrategy worker took more than"
                                f" {timeout:g} s")
        time.sleep(POLL_SECONDS)


def multiworker_sum(function: Any, args: Sequence[Any], kwargs: dict[str, Any],
                    batch: Sequence[int], workers: int, timeout: float = 300.0,
                    scratch: str | None = None) -> list[np.ndarray]:
    """The gradient MultiWorkerMirroredStrategy sums over WORKERS local processes, each on
    its share of the batch arguments (indices BATCH), per variable in loss_gradients' order;
    their files in a folder under SCRATCH (default: the system's temporary folder)."""
    ports = free_ports(workers)
    cluster = {"worker": [f"localhost:{port}" for port in ports]}
    with tempfile.TemporaryDirectory(prefix="gradcheck-multiworker-", dir=scratch) as folder:
        job = ([_portable(a) for a in args], {k: _portable(v) for k, v in kwargs.items()})
        _write(Path(folder) / JOB, pickle.dumps((function, *job, list(batch), workers)))
        path = os.pathsep.join(p for p in sys.path if p)
        environments = [{**os.environ, "PYTHONPATH": path, "CUDA_VISIBLE_DEVICES": "-1",
                         "TF_CPP_MIN_LOG_LEVEL": "3", "TF_CONFIG": json.dumps(
                             {"cluster": cluster, "task": {"type": "worker", "index": i}})}
                        for i in range(workers)]
        command = [sys.executable, "-m", "gradcheck.kinds.strategy.multiworker", folder]
        with _started([command + [str(i)] for i in range(workers)], environments,
                      Path(folder)) as started:
            _wait(started, Path(folder), timeout)
        with np.load(Path(folder) / RESULT) as summed:
            return [summed[f"g{i}"] for i in range(len(summed.files))]


def _exit_with_parent() -> None:
    """The worker that started this one has ended (its end of this process's stdin closed):
    what this one started ends, then this one."""
    with contextlib.suppress(OSError):  # the descriptor, not sys.stdin: its lock would stop
        while os.read(0, 1 << 16):      # the interpreter's shutdown
            pass
    with contextlib.suppress(Exception):
        end_tree(os.getpid(), include_root=False, wait=2.0)
    os._exit(1)


def _work(folder: str, index: int) -> None:
    become_subreaper()  # what f starts and orphans stays under this process, to be ended
    threading.Thread(target=_exit_with_parent, daemon=True).start()
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
        buffer = io.BytesIO()  # never a half-written zip file whose __del__ fails again
        np.savez(buffer, **{f"g{i}": np.asarray(as_array(g)) for i, g in enumerate(summed)})
        try:
            _write(Path(folder) / RESULT, buffer.getvalue())
        except InputError as exc:
            with contextlib.suppress(OSError):  # its stderr file may be on the full disk too
                print(exc.message, file=sys.stderr, flush=True)
            os._exit(CANNOT_WRITE)


if __name__ == "__main__":
    _work(sys.argv[1], int(sys.argv[2]))
