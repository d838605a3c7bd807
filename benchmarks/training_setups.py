"""The cost of the training-setup checks against the plain check of the same loss, in one
process (TensorFlow's start-up left out), interleaved, medians of ROUNDS runs:
`accumulate=2`, `strategy="mirrored:2"` (two logical CPUs) and, as whole command lines,
`--strategy multiworker:2` (two more TensorFlow processes) against the plain command."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROUNDS = 5
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _in_process() -> None:
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import gradcheck
    from gradcheck.targets.modules import import_module

    losses = import_module(str(FIXTURES / "distributed_loss.py"))
    setups = {"plain": {}, "accumulate=2": {"accumulate": 2},
              "strategy=mirrored:2": {"strategy": "mirrored:2"}}
    times: dict[str, list[float]] = {name: [] for name in setups}
    for _ in range(ROUNDS + 1):  # the first round warms every setup up
        for name, extra in setups.items():
            start = time.perf_counter()
            gradcheck.check(losses.average_loss, *losses.average_loss_inputs, wrt="variables",
                            compiled=False, **extra)
            times[name].append(time.perf_counter() - start)
    plain = statistics.median(times["plain"][1:])
    for name, runs in times.items():
        median = statistics.median(runs[1:])
        print(f"{name:22s} {median * 1000:8.0f} ms  {median / plain:5.2f}x")


def _command_lines() -> None:
    target = f"{FIXTURES / 'distributed_loss.py'}:average_loss"
    base = [sys.executable, "-m", "gradcheck", "check", target, "--wrt", "variables",
            "--no-compiled", "-q"]
    setups = {"plain command": [], "multiworker:2 command": ["--strategy", "multiworker:2"]}
    times: dict[str, list[float]] = {name: [] for name in setups}
    for _ in range(2):
        for name, extra in setups.items():
            start = time.perf_counter()
            subprocess.run(base + extra, capture_output=True, check=True)
            times[name].append(time.perf_counter() - start)
    plain = statistics.median(times["plain command"])
    for name, runs in times.items():
        median = statistics.median(runs)
        print(f"{name:22s} {median:8.1f} s   {median / plain:5.2f}x")


if __name__ == "__main__":
    _command_lines() if sys.argv[1:] == ["--command-lines"] else _in_process()
