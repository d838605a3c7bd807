"""gradcheck.Watch's cost in a real fit: milliseconds per step of a tiny MLP (about 1 ms steps,
where any per-step op shows) and of an MNIST-sized CNN (plain fit, fit with
keras.callbacks.TerminateOnNaN, fit with gradcheck.Watch), interleaved in one process in
alternating order so that all three see the same machine, and the ratios to plain fit.

Run from a clone: `python benchmarks/watch_overhead.py [--epochs N] [--repeats N]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    arguments = parser.parse_args()

    import keras
    import numpy as np

    import gradcheck

    rng = np.random.default_rng(0)

    def mlp() -> keras.Model:
        return keras.Sequential([keras.Input((32,)), keras.layers.Dense(128, "relu"),
                                 keras.layers.Dense(128, "relu"), keras.layers.Dense(10)])

    def cnn() -> keras.Model:  # MNIST-sized: what "a realistic small model" means here
        return keras.Sequential([
            keras.Input((28, 28, 1)), keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.MaxPooling2D(), keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(), keras.layers.Flatten(), keras.layers.Dense(10)])

    data = {"MLP 32-128-128-10": (mlp, rng.normal(size=(20000, 32)).astype("float32")),
            "CNN on 28x28": (cnn, rng.normal(size=(4096, 28, 28, 1)).astype("float32"))}
    directory = tempfile.mkdtemp(prefix="gradcheck-watch-bench-")
    runs = {
        "plain fit": lambda: [],
        "TerminateOnNaN": lambda: [keras.callbacks.TerminateOnNaN()],
        "gradcheck.Watch": lambda: [gradcheck.Watch(directory, diagnose=False)],
    }
    for label, (build, x) in data.items():
        y = rng.integers(0, 10, size=(len(x),))
        seconds: dict[str, list[float]] = {name: [] for name in runs}
        final: dict[str, list[np.ndarray]] = {}
        names = list(runs)
        for repeat in range(arguments.repeats + 1):  # the first round warms up
            for name in names if repeat % 2 else names[::-1]:  # alternate the order
                keras.utils.set_random_seed(0)
                m = build()
                m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
                m.fit(x[:256], y[:256], batch_size=64, epochs=1, verbose=0, shuffle=False)
                started = time.perf_counter()
                m.fit(x, y, batch_size=64, epochs=arguments.epochs, verbose=0, shuffle=False,
                      callbacks=runs[name]())
                if repeat:
                    seconds[name].append((time.perf_counter() - started) / arguments.epochs)
                final[name] = m.get_weights()
        base = statistics.median(seconds["plain fit"])
        steps = len(x) // 64
        print(f"{label}: {steps} steps/epoch, {arguments.repeats} repeats, median")
        print(f"  {'run':<18} {'ms/step':>9} {'x plain fit':>12}")
        for name, values in seconds.items():
            median = statistics.median(values)
            print(f"  {name:<18} {1000 * median / steps:9.3f} {median / base:12.3f}")
        same = all(np.array_equal(a, b)
                   for a, b in zip(final["plain fit"], final["gradcheck.Watch"]))
        print(f"  weights after the watched run bitwise equal to plain fit's: {same}")


if __name__ == "__main__":
    main()
