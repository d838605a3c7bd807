"""Twenty small functions of three float64 elements, each of different ops, for run_many.py."""

import tensorflow as tf

_W = tf.constant([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [-0.5, 1.0, 0.3]], tf.float64)


def f01(x):
    return tf.sin(x) * x


def f02(x):
    return tf.exp(0.5 * x) - x**2


def f03(x):
    return tf.math.log1p(x * x)


def f04(x):
    return tf.tanh(x) + tf.cos(x)


def f05(x):
    return tf.linalg.matvec(_W, x)


def f06(x):
    return tf.nn.softmax(x)


def f07(x):
    return tf.reduce_sum(x**3)


def f08(x):
    return tf.math.cumsum(x) * tf.reduce_mean(x)


def f09(x):
    return tf.sqrt(x * x + 1.0)


def f10(x):
    return tf.math.sigmoid(x) * tf.math.softplus(x)


def f11(x):
    return tf.reverse(x, [0]) * x


def f12(x):
    return tf.math.atan(x) / (1.0 + x * x)


def f13(x):
    return tf.stack([x[0] * x[1], x[1] * x[2], x[2] * x[0]])


def f14(x):
    return tf.math.reduce_logsumexp(x) + tf.norm(x)


def f15(x):
    return tf.math.erf(x) + tf.math.sinh(0.3 * x)


def f16(x):
    return tf.linalg.matvec(_W, tf.tanh(x)) ** 2


def f17(x):
    return tf.math.cumprod(x + 2.0)


def f18(x):
    return tf.math.xlogy(x * x + 1.0, x * x + 2.0)


@tf.custom_gradient
def f19(x):
    def grad_fn(upstream):
        return upstream * tf.cos(x)

    return tf.sin(x), grad_fn


@tf.custom_gradient
def f20(x):
    y = tf.exp(x) / tf.reduce_sum(tf.exp(x))

    def grad_fn(upstream):
        return y * (upstream - tf.reduce_sum(upstream * y))

    return y, grad_fn


FUNCTIONS = [f01, f02, f03, f04, f05, f06, f07, f08, f09, f10,
             f11, f12, f13, f14, f15, f16, f17, f18, f19, f20]
POINT = [0.5, -1.0, 2.0]
