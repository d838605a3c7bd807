"""Input and upstream specifications: literals, files, shapes, providers, naming."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result

from gradcheck.errors import InputError
from gradcheck.load.inputs import (
    Arguments,
    OutputPath,
    name_arguments,
    parse_shape,
    parse_upstreams,
    parse_value,
    resolve_arguments,
    resolve_upstreams,
)

from .conftest import fixture_module, fixture_target


def test_float_literals_stay_python_floats_and_ints_become_arrays() -> None:
    """A literal has no dtype of its own (TensorFlow would make it float32), unlike a .npy."""
    value = parse_value("[1.0, 2.0]")
    assert value == [1.0, 2.0] and isinstance(value[0], float)
    assert parse_value("3") == 3
    assert parse_value("2.5") == 2.5
    ints = parse_value("[1, 2]")
    assert isinstance(ints, np.ndarray) and ints.dtype.kind == "i"
    assert parse_value("'text'") == "text"


def test_literal_is_never_evaluated() -> None:
    with pytest.raises(InputError) as info:
        parse_value("__import__('os').getcwd()")
    assert "is neither a .npy/.npz file nor a literal" in info.value.message


def test_npy_and_npz_files(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.arange(3.0))
    np.savez(tmp_path / "kw.npz", scale=np.ones(2))
    assert parse_value(str(tmp_path / "x.npy")).tolist() == [0.0, 1.0, 2.0]
    arguments = resolve_arguments("f", None, input_specs=[str(tmp_path / "kw.npz")])
    assert list(arguments.kwargs) == ["scale"]


def test_pickled_npy_is_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError) as info:
        parse_value(str(tmp_path / "obj.npy"))
    assert "holds Python objects (pickled data)" in info.value.message


def test_keyword_inputs_and_order() -> None:
    arguments = resolve_arguments("f", None, input_specs=["[1.0]", "scale=2.0"])
    assert len(arguments.args) == 1 and float(arguments.kwargs["scale"]) == 2.0
    with pytest.raises(InputError, match="follows a keyword input"):
        resolve_arguments("f", None, input_specs=["scale=2.0", "[1.0]"])


def test_shapes_are_seeded() -> None:
    first = resolve_arguments("f", None, shapes=["2,3"], seed=4)
    second = resolve_arguments("f", None, shapes=["2,3"], seed=4)
    assert np.shape(first.args[0]) == (2, 3)
    np.testing.assert_array_equal(first.args[0], second.args[0])
    with pytest.raises(InputError, match="every dimension must be positive"):
        parse_shape("0,3")


def test_convention_and_precedence() -> None:
    module = fixture_module("two_in_two_out")
    by_convention = resolve_arguments("f", module)
    assert by_convention.source == "f_inputs" and len(by_convention.args) == 2
    explicit = resolve_arguments("f", module, input_specs=["[1.0]", "[2.0]"])
    assert explicit.source == "-i/--input"


def test_no_inputs_names_the_four_ways() -> None:
    with pytest.raises(InputError) as info:
        resolve_arguments("g", None)
    assert info.value.message == (
        "no inputs for g: give -i/--input VALUE, --shape 2,3, --inputs MOD:ATTR, or a"
        " 'g_inputs' attribute in the target's module"
    )


@pytest.mark.parametrize(("target", "shapes"), [
    ("one_input", {"inputs": [2, 3]}), ("signed", {"x": [2, 3]}),
    ("two_inputs", {"inputs['age']": [2, 1], "inputs['income']": [2, 2]})])
def test_a_model_or_tf_function_that_declares_its_input_is_checked_without_inputs(
        run_cli: Callable[..., Result], target: str, shapes: dict[str, list[int]]) -> None:
    result = run_cli(["check", fixture_target("declared_inputs", target), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert {i["name"]: i["shape"] for i in json.loads(result.stdout)["inputs"]
            if i["kind"] == "argument"} == shapes


def test_a_model_never_called_still_asks_for_inputs(run_cli: Callable[..., Result]) -> None:
    result = run_cli(["check", fixture_target("declared_inputs", "unbuilt")])
    assert result.exit_code == 2
    assert "no inputs for unbuilt: give -i/--input VALUE" in result.output


def test_a_loss_closure_over_variables_needs_no_inputs(run_cli: Callable[..., Result]
                                                        ) -> None:
    """GPflow's training_loss, the closure opt.minimize takes: f() checked in its variables;
    a function with parameters still asks for inputs."""
    wrong = run_cli(["check", fixture_target("loss_closure", "loss"), "--format", "json"])
    assert wrong.exit_code == 1, wrong.output
    failed = [c for c in json.loads(wrong.stdout)["checks"] if c["status"] == "fail"]
    assert {c["check"] for c in failed} >= {"custom-gradient", "jacobian", "vjp"}
    assert any((c["location"] or "").endswith("loss_closure.py:11") for c in failed)
    assert run_cli(["check", fixture_target("loss_closure", "correct")]).exit_code == 0
    with pytest.raises(InputError):
        resolve_arguments("g", None, function=lambda x: x)


def test_naming_follows_the_signature() -> None:
    def f(x, scale, *rest, **extra):  # type: ignore[no-untyped-def]
        return x

    named = name_arguments(f, Arguments((1.0, 2.0, 3.0), {"bias": 0.5}))
    assert [n.name for n in named] == ["x", "scale", "rest[0]", "bias"]


def test_wrong_argument_count() -> None:
    def f(x, y):  # type: ignore[no-untyped-def]
        return x

    with pytest.raises(InputError, match=r"f\(x, y\) cannot take the given inputs"):
        name_arguments(f, Arguments((1.0,), {}, "-i/--input"))


def test_nan_input_is_refused() -> None:
    with pytest.raises(InputError, match="input x contains NaN or Inf"):
        name_arguments(lambda x: x, Arguments((np.array([1.0, np.nan]),)))


def test_upstream_shape_mismatch_is_an_error_not_a_broadcast() -> None:
    parsed = parse_upstreams(["[1.0, 2.0, 3.0]"])
    with pytest.raises(InputError) as info:
        resolve_upstreams(parsed, [(OutputPath("y"), (2,))], seed=0)
    assert info.value.message == (
        "upstream for y has shape (3,) but y has shape (2,); TensorFlow would silently broadcast"
        " it, so give an upstream of shape (2,)"
    )


def test_upstream_count_and_keywords() -> None:
    outputs = [(OutputPath("y", (0,)), (2,)), (OutputPath("y", (1,)), (3,))]
    ones = resolve_upstreams(parse_upstreams(["ones"]), outputs, seed=0)
    assert [u.tolist() for u in ones] == [[1.0, 1.0], [1.0, 1.0, 1.0]]
    with pytest.raises(InputError, match="3 --upstream values for 2 outputs"):
        resolve_upstreams(parse_upstreams(["ones", "ones", "ones"]), outputs, seed=0)


def test_output_paths_show_as_python_spells_them() -> None:
    assert str(OutputPath("y")) == "y"
    assert str(OutputPath("y", ("mean", 0))) == "y['mean'][0]"
    assert OutputPath("out").child(2) == OutputPath("out", (2,))
    assert OutputPath("y", ("a[1]",)).last == "a[1]" and OutputPath("y").last == "y"


def test_an_upstream_npz_names_outputs_in_full_or_by_their_innermost_key() -> None:
    outputs = [(OutputPath("y", ("mean",)), (2,)), (OutputPath("y", ("scale", "a[1]")), (1,)),
               (OutputPath("y", ("rest",)), (1,))]
    given = {"mean": np.array([1.0, 2.0]), "a[1]": np.array([3.0])}
    mean, scale, rest = resolve_upstreams([given], outputs, seed=0)
    assert mean.tolist() == [1.0, 2.0] and scale.tolist() == [3.0] and rest.shape == (1,)
    full = resolve_upstreams([{"y['mean']": np.array([5.0, 6.0])}], outputs[:1], seed=0)
    assert full[0].tolist() == [5.0, 6.0]
    with pytest.raises(InputError, match=r"keys \['scale'\] that name no output"):
        resolve_upstreams([{"scale": np.array([1.0])}], outputs, seed=0)
