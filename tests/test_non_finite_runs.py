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
