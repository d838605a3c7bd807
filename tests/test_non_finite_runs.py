"""What a non-finite diagnosis costs in runs of the traced graph, on real TensorFlow: the graph
computes one finiteness flag per tensor except where another tensor's flag says it (a reshape's
elements are its input's), and a fix trial runs the function that fetched the values around the
first op instead of instantiating the step's graph once more."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import gradcheck
from gradcheck.engine.binding import prepare
from gradcheck.forensics import values
from gradcheck.forensics.values import not_finite, trace_values
from gradcheck.load.inputs import Arguments, name_arguments


def _reshaped(x: Any) -> Any:
    import tensorflow as tf

    y = tf.reshape(tf.math.log(x), [2, 3])
    z = tf.squeeze(tf.expand_dims(tf.identity(y), 0))
    return tf.reduce_sum(tf.sqrt(z) + tf.reshape(z, [6])[0])


def test_flags_shared_by_reshapes_are_what_numpy_says_of_every_value(monkeypatch) -> None:
    x = np.array([1.0, 2.0, -1.0, 0.5, 0.0, 3.0])
    program = prepare(_reshaped, name_arguments(_reshaped, Arguments((x,), {}, "test")),
                      "auto").program
    flagged: list[int] = []
    finite_flags = values.finite_flags

    def counted(tensors: Any, described: Any = ()) -> Any:
        flagged.append(len(tensors))
        return finite_flags(tensors, described)

    monkeypatch.setattr(values, "finite_flags", counted)
    traced = trace_values(program, None, on_demand=True)
    whole = trace_values(program, None)
    assert traced is not None and whole is not None
    assert traced.finite and flagged[0] < len(traced.finite)  # reshapes take their input's
    for name, finite in traced.finite.items():
        assert finite == (not not_finite(whole.values[name])), name
    traced.close()


def test_a_fix_trial_reuses_the_function_that_fetched_the_values(tmp_path, monkeypatch) -> None:
    """One function made for the flags' run, one for the values around the op and the trial
    of standardised features (before: a third for the trial)."""
    import keras
    from tensorflow.python.eager import context

    made: list[str] = []
    remove = context.Context.remove_function

    def removed(self: Any, name: str) -> None:
        if str(name).startswith("gradcheck_subgraph_"):
            made.append(name)
        remove(self, name)

    monkeypatch.setattr(context.Context, "remove_function", removed)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(1e-3), loss="mse")
    x = np.random.default_rng(0).normal(size=(16, 3)).astype("float32")
    x[:, 2] *= 1e37  # an unscaled feature: the squared error overflows
    y = np.zeros((16, 1), "float32")
    lines: list[str] = []
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0,
              callbacks=[gradcheck.Watch(tmp_path, log=lines.append)])
    finding = next(line for line in lines if "snapshot" in line)
    assert "features of x standardised" in finding, finding
    assert len(made) == 2, made


@pytest.mark.parametrize("kind", ["Reshape", "Squeeze"])
def test_only_ops_that_keep_their_inputs_elements_share_a_flag(kind: str) -> None:
    assert kind in values._SAME_ELEMENTS
    assert not {"Cast", "StridedSlice", "GatherV2", "Slice"} & values._SAME_ELEMENTS


class _Counted:
    """A Keras layer (made on first use) that counts the model's eager calls."""

    eager = 0

    @classmethod
    def layer(cls) -> Any:
        import keras
        import tensorflow as tf

        class Counting(keras.layers.Layer):
            def call(self, x: Any) -> Any:
                if tf.executing_eagerly():
                    cls.eager += 1
                return x

        return Counting()


def _log_loss(y_true: Any, y_pred: Any) -> Any:
    import tensorflow as tf

    return tf.reduce_mean(tf.math.log(y_pred) - y_true)  # NaN where y_pred < 0


def test_a_steps_diagnosis_calls_the_model_eagerly_once_to_record(tmp_path) -> None:
    """A float32 step whose NaN is only located runs in float32, as fit ran it: no float64
    call and backward pass of the model to choose its dtype, and no untaped call before the
    taped one (before: three eager calls, then two)."""
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), _Counted.layer(),
                              keras.layers.Dense(1, kernel_initializer="ones")])
    model.compile(optimizer=keras.optimizers.SGD(1e-9), loss=_log_loss)
    x = np.ones((16, 3), "float32")
    x[9] = -1.0  # step 1: the output turns negative
    y = np.zeros((16, 1), "float32")
    lines: list[str] = []
    watch = gradcheck.Watch(tmp_path, log=lines.append)
    original = watch._diagnosis

    def counted(*args: Any) -> Any:
        before = _Counted.eager
        found = original(*args)
        counted.calls = _Counted.eager - before  # type: ignore[attr-defined]
        return found

    watch._diagnosis = counted  # type: ignore[method-assign]
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0, callbacks=[watch])
    finding = next(line for line in lines if "snapshot" in line)
    assert "the loss is NaN in 1 of 1 element(s)" in finding, finding
    assert "is Log (inside compile_loss/_log_loss)" in finding, finding
    assert "whose value Log(-3) is NaN" in finding and "softplus" in finding, finding
    assert counted.calls == 1, counted.calls  # type: ignore[attr-defined]
    assert watch.last_report is not None
    assert [i.dtype for i in watch.last_report.inputs if i.name in ("x", "y")] == [
        "float32", "float32"]
