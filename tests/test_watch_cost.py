"""What a caught step's diagnosis runs: the loss called eagerly once (no untaped call before the
taped one), the weights scanned for a diverged one only when the first op's arguments are huge,
and the backward ops' counts read without copying the graph's list of ops."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck.errors import GradcheckError

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")


def _model() -> object:
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(
        1, kernel_initializer="ones", bias_initializer="zeros")])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    return model


def _log_loss(model, x, y):  # noqa: ANN001, ANN202 - the step's loss, loss_fn(model, *batch)
    _log_loss.eager += int(tf.executing_eagerly())
    return tf.reduce_mean(tf.math.log(model(x, training=True)) - y)


def test_the_step_is_called_eagerly_once_and_the_weights_not_scanned(monkeypatch):
    from gradcheck.training import keras_snapshot
    from gradcheck.training.step import check_step, step_options

    scans = []
    monkeypatch.setattr(keras_snapshot, "largest_weight", lambda model: scans.append(model))
    model = _model()
    x = np.array([[1.0, 1.0, 1.0], [-1.0, -1.0, -2.0]], "float32")  # log(-4): NaN
    y = np.zeros((2, 1), "float32")
    _log_loss.eager = 0
    report = check_step(model, _log_loss, (x, y), "args", step_options("non-finite-loss"),
                        "step")
    finding = next(c for c in report.checks if c.failed)
    assert finding.cause.facts.first.op == "Log"
    assert _log_loss.eager == 1  # record's taped call only: no untaped call before it
    assert not scans  # log's argument, -4, is no diverged weight's doing


def test_a_loss_that_raises_reads_as_its_untaped_call_raises():
    from gradcheck.training.step import check_step, step_options

    def raising(model, x, y):  # noqa: ANN001, ANN202
        raise ValueError("the batch has the wrong width")

    x = np.ones((2, 3), "float32")
    with pytest.raises(GradcheckError, match="the batch has the wrong width"):
        check_step(_model(), raising, (x, x[:, :1]), "args", step_options("non-finite-loss"),
                   "step")


def test_the_op_count_follows_the_graph_as_ops_are_added():
    from gradcheck.forensics.values import _op_counter

    graph = tf.Graph()
    with graph.as_default():
        tf.constant(1.0)
        count = _op_counter(graph)
        assert count() == len(graph.get_operations())
        a = tf.compat.v1.placeholder(tf.float32, [2])
        tf.math.log(a) + tf.sqrt(a)
        assert count() == len(graph.get_operations()) == 5
