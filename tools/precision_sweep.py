"""Keras' own layers under mixed_float16 and mixed_bfloat16, each in a small model whose loss is
checked by gradcheck's precision check alone: a correct mixed model must pass (no false alarm).

Run from a clone: `python tools/precision_sweep.py` (prints a table; exit 1 on any failure)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def layers() -> dict[str, tuple[tuple[int, ...], Callable[[], object]]]:
    import keras

    L = keras.layers
    return {
        "Dense": ((8,), lambda: L.Dense(16, "relu")),
        "Conv1D": ((12, 3), lambda: L.Conv1D(4, 3, activation="relu")),
        "Conv2D": ((8, 8, 3), lambda: L.Conv2D(4, 3, activation="relu")),
        "DepthwiseConv2D": ((8, 8, 3), lambda: L.DepthwiseConv2D(3)),
        "Conv2DTranspose": ((6, 6, 3), lambda: L.Conv2DTranspose(4, 3)),
        "SeparableConv2D": ((8, 8, 3), lambda: L.SeparableConv2D(4, 3)),
        "LSTM": ((6, 4), lambda: L.LSTM(8)),
        "GRU": ((6, 4), lambda: L.GRU(8)),
        "SimpleRNN": ((6, 4), lambda: L.SimpleRNN(8)),
        "LayerNormalization": ((8,), lambda: L.LayerNormalization()),
        "BatchNormalization": ((8,), lambda: L.BatchNormalization()),
        "MultiHeadAttention": ((5, 8), lambda: _SelfAttention()),
        "Softmax head": ((8,), lambda: L.Dense(10, activation="softmax")),
        "GlobalAveragePooling1D": ((12, 3), lambda: L.GlobalAveragePooling1D()),
        "MaxPooling2D": ((8, 8, 3), lambda: L.MaxPooling2D()),
    }


class _SelfAttention:
    def __new__(cls) -> object:
        import keras

        class SelfAttention(keras.layers.Layer):
            def __init__(self) -> None:
                super().__init__()
                self.attention = keras.layers.MultiHeadAttention(2, 4)

            def call(self, x):  # type: ignore[no-untyped-def]
                return self.attention(x, x)

        return SelfAttention()


def main() -> int:
    import keras
    import numpy as np
    import tensorflow as tf

    import gradcheck

    def loss(model, x):  # type: ignore[no-untyped-def]
        return tf.reduce_mean(tf.square(tf.cast(model(x), tf.float32)))

    rng = np.random.default_rng(0)
    failures = 0
    print(f"{'layer':<24} {'mixed_float16':<28} {'mixed_bfloat16':<28}")
    for name, (shape, make) in layers().items():
        cells = []
        for policy in ("mixed_float16", "mixed_bfloat16"):
            keras.mixed_precision.set_global_policy(policy)
            try:
                keras.utils.set_random_seed(0)
                model = keras.Sequential([keras.Input(shape), make(), keras.layers.Flatten(),
                                          keras.layers.Dense(1, dtype="float32")])
            finally:
                keras.mixed_precision.set_global_policy("float32")
            x = rng.normal(size=(4, *shape)).astype("float32")
            report = gradcheck.check(loss, model, x, kinds=frozenset({"precision"}),
                                     wrt="variables", compiled=False)
            checks = [c for c in report.checks if c.check == "precision"]
            failed = [c for c in checks if c.failed]
            failures += bool(failed)
            worst = max((c.max_rel_err or 0.0 for c in checks), default=0.0)
            cells.append(f"{'FAIL' if failed else 'pass'} {len(checks)} weights, err {worst:.1e}")
        print(f"{name:<24} {cells[0]:<28} {cells[1]:<28}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
