"""The benchmark's command-line targets: fast mode at 10⁷ inputs and 10⁶-weight Keras models.

`GRADCHECK_BENCH_N` sets the elementwise functions' size (default 10⁷; --quick uses 10⁵).
"""

import os

import numpy as np
import tensorflow as tf

N = int(os.environ.get("GRADCHECK_BENCH_N", 10_000_000))


def _softplus(x):
    return tf.where(x > 20.0, x, tf.math.log1p(tf.exp(tf.minimum(x, 20.0))))


@tf.custom_gradient
def softplus_correct(x):
    def grad_fn(upstream):
        return upstream * tf.sigmoid(x)

    return _softplus(x), grad_fn


# Every hundredth element (1 %) gets 1.5 times its true derivative.
_WRONG = tf.constant(np.arange(N) % 100 == 37)


@tf.custom_gradient
def softplus_wrong(x):
    def grad_fn(upstream):
        return upstream * tf.where(_WRONG, 1.5 * tf.sigmoid(x), tf.sigmoid(x))

    return _softplus(x), grad_fn


softplus_correct_inputs = softplus_wrong_inputs = (
    np.random.default_rng(0).normal(scale=3.0, size=N),)


def mlp():
    """784 -> 1152 (ReLU) -> 128 (tanh) -> 10: 1 053 194 weights."""
    import keras

    keras.utils.set_random_seed(0)
    return keras.Sequential([
        keras.Input((784,)),
        keras.layers.Dense(1152, activation="relu"),
        keras.layers.Dense(128, activation="tanh"),
        keras.layers.Dense(10),
    ])


def cnn():
    """Two 3x3 convolutions, max pooling and two dense layers on 28x28: 1 033 796 weights."""
    import keras

    keras.utils.set_random_seed(0)
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.Conv2D(64, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(110, activation="tanh"),
        keras.layers.Dense(10),
    ])


mlp_inputs = (np.random.default_rng(1).normal(size=(8, 784)),)
cnn_inputs = (np.random.default_rng(2).normal(size=(4, 28, 28, 1)),)
