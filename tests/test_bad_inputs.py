"""The robustness matrix: every bad input ends with one `Error:` line, its exit code, no file."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result

USAGE, FUNCTION = 2, 3
FORMAT = "'module:function' or 'path/to/file.py:function'"


@dataclass(frozen=True)
class Bad:
    id: str
    args: tuple[str, ...]
    message: str
    code: int = USAGE


def bad(id: str, args: str | tuple[str, ...], message: str, code: int = USAGE) -> Bad:
    return Bad(id, (args,) if isinstance(args, str) else args, message, code)


HUGE = ("importing module 'import_raises_huge' raised ValueError: " + "x" * 4_000_000
        + " (at bad/import_raises_huge.py:3)")
CHECK_F = ("check", "bad/no_inputs.py:f")
SHAPE_3 = (*CHECK_F, "--shape", "3")

MATRIX = [
    # TARGET and loading
    bad("option-of-another-command", ("check", "bad/raises.py:f", "--explain"),
        "No such option '--explain': it is an option of gradcheck vjp"),
    bad("empty-target", ("check", ""), f"TARGET is empty; expected {FORMAT}"),
    bad("garbled-target", ("check", "softplus"), f"TARGET 'softplus' must be {FORMAT}"),
    bad("bad-attribute-path", ("check", "bad/raises.py:f-1"),
        "TARGET 'bad/raises.py:f-1': 'f-1' is not a valid attribute path"),
    bad("file-not-found", ("check", "bad/nope.py:f"), "file 'bad/nope.py' not found"),
    bad("module-not-found", ("check", "no_such_module_gc:f"),
        "could not import module 'no_such_module_gc': no module named 'no_such_module_gc'"
        " (searched --path '.' and sys.path)"),
    bad("import-error-inside-module", ("check", "bad/import_error.py:f"),
        "importing module 'import_error' failed: No module named"
        " 'not_an_installed_package_gradcheck' (at bad/import_error.py:4)"),
    bad("eager-execution-disabled", ("check", "bad/graph_mode.py:f", "-i", "[1.0, 2.0]"),
        "eager execution is disabled (bad/graph_mode.py:3 calls"
        " tf.compat.v1.disable_eager_execution() or disable_v2_behavior()): gradcheck checks"
        " TensorFlow 2 code, which runs eagerly; remove that call (graph-mode code can be"
        " wrapped in tf.function instead)"),
    bad("module-raises-on-import", ("check", "bad/import_raises.py:f"),
        "importing module 'import_raises' raised KeyError: 'learning_rate'"
        " (at bad/import_raises.py:4)"),
    bad("syntax-error", ("check", "bad/syntax_error.py:f"),
        "syntax error in bad/syntax_error.py:7: '(' was never closed"),
    bad("attribute-missing", ("check", "bad/no_inputs.py:missing"),
        "attribute 'missing' not found in module 'bad/no_inputs.py'"),
    bad("attribute-not-callable", ("check", "bad/not_callable.py:f"),
        "'bad/not_callable.py:f' is not callable (it is a list)"),
    bad("class-not-function", ("check", "bad/a_class.py:Layer"),
        "'bad/a_class.py:Layer' is a class, not a function; name a function or a method"
        " (bad/a_class.py:Layer.method)"),
    bad("target-with-nul-bytes", ("check", "{data}/nul.py:f"),
        "cannot import {data}/nul.py: it contains NUL bytes, so it is not Python source (a"
        " binary file, or saved as UTF-16?)"),
    bad("target-is-a-folder", ("check", "{data}/folder.py:f"),
        "file '{data}/folder.py' is a folder, not a file"),
    bad("import-raises-a-4mb-message", ("check", "bad/import_raises_huge.py:f"),
        HUGE[:1000] + f"... ({len(HUGE):,} characters in all; --traceback shows them)"),
    bad("path-not-a-directory", (*SHAPE_3, "--path", "nowhere"),
        "--path 'nowhere' is not a directory"),
    # arguments for the signature
    bad("too-few-inputs", ("check", "bad/two_args.py:f"),
        "f(x, y) cannot take the given inputs (f_inputs): missing a required argument: 'y'"),
    bad("too-many-inputs", ("check", "bad/two_args.py:f", "-i", "[1.0]", "-i", "[2.0]", "-i",
                            "[3.0]"),
        "f(x, y) cannot take the given inputs (-i/--input): too many positional arguments"),
    bad("npz-unknown-key", (*CHECK_F, "-i", "{data}/extra.npz"),
        "f(x) cannot take the given inputs (-i/--input): got an unexpected keyword argument 'z'"),
    bad("no-inputs-at-all", CHECK_F,
        "no inputs for f: give -i/--input VALUE, --shape 2,3, --inputs MOD:ATTR, or a"
        " 'f_inputs' attribute in the target's module"),
    bad("inputs-provider-raises", (*CHECK_F, "--inputs", "bad/no_inputs.py:bad_provider"),
        "bad/no_inputs.py:bad_provider() raised RuntimeError: dataset not downloaded"),
    bad("integer-inputs-only", (*CHECK_F, "--inputs", "bad/no_inputs.py:int_inputs"),
        "no floating-point input to differentiate (x is list); write floats like '[1.0, 2.0]'"),
    # input values and files
    bad("npy-missing", (*CHECK_F, "-i", "{data}/missing.npy"),
        "input file '{data}/missing.npy' not found"),
    bad("npy-is-a-folder", (*CHECK_F, "-i", "{data}/folder.npy"),
        "input file '{data}/folder.npy' is a folder, not a file"),
    bad("npy-is-a-fifo", (*CHECK_F, "-i", "{data}/pipe.npy"),
        "input file '{data}/pipe.npy' is a FIFO (named pipe), not a regular file"),
    bad("npy-is-a-symlink-loop", (*CHECK_F, "-i", "x={data}/loop.npy"),
        "input x file '{data}/loop.npy' is a symlink loop"),
    bad("npy-empty", (*CHECK_F, "-i", "{data}/empty.npy"),
        "input file '{data}/empty.npy' is empty (0 bytes)"),
    bad("npy-truncated", (*CHECK_F, "-i", "{data}/truncated.npy"),
        "cannot read input '{data}/truncated.npy': its header declares shape (4,) of float64"
        " (32B) but the file holds 24B of data (truncated?)"),
    bad("npy-header-declares-a-terabyte", (*CHECK_F, "-i", "{data}/huge.npy"),
        "cannot read input '{data}/huge.npy': its header declares shape (1000000000000,) of"
        " float64 (7.3TiB) but the file holds 16B of data (truncated?)"),
    bad("shape-larger-than-memory", (*CHECK_F, "--shape", "100000000000"),
        "--shape '100000000000' is 100,000,000,000 elements (745.1GiB as float64), more than a"
        " worker may hold (4.0GiB: 4 x --max-memory, at least 2GiB); raise --max-memory or give"
        " a smaller shape"),
    bad("npy-pickled-objects", (*CHECK_F, "-i", "{data}/objects.npy"),
        "input '{data}/objects.npy' holds Python objects (pickled data); gradcheck loads .npy"
        " files with allow_pickle=False: save numeric arrays"),
    bad("npy-strings", (*CHECK_F, "-i", "{data}/strings.npy"),
        "input '{data}/strings.npy' has dtype <U5; inputs must be numeric arrays"),
    bad("npy-not-numpy", (*CHECK_F, "-i", "{data}/text.npy"),
        "input file '{data}/text.npy' is not a .npy file (no NumPy header); save it with"
        " numpy.save"),
    bad("npz-not-zip", (*CHECK_F, "-i", "{data}/text.npz"),
        "input file '{data}/text.npz' is not a .npz (zip) archive; save it with numpy.savez"),
    bad("literal-unclosed", (*CHECK_F, "-i", "[1.0, 2.0"),
        "input '[1.0, 2.0' is neither a .npy/.npz file nor a literal such as '[1.0, 2.0]'"),
    bad("literal-is-code", (*CHECK_F, "-i", "__import__('os').getcwd()"),
        "input \"__import__('os').getcwd()\" is neither a .npy/.npz file nor a literal such as"
        " '[1.0, 2.0]'"),
    bad("literal-ragged", (*CHECK_F, "-i", "[[1.0, 2.0], [3.0]]"),
        "input '[[1.0, 2.0], [3.0]]' is not a rectangular array"),
    bad("nan-in-npy", (*CHECK_F, "-i", "{data}/nan.npy"),
        "input x contains NaN or Inf; gradients need a finite point"),
    bad("nan-from-provider", (*CHECK_F, "--inputs", "bad/no_inputs.py:nan_inputs"),
        "input x contains NaN or Inf; gradients need a finite point"),
    bad("zero-size-input", (*CHECK_F, "-i", "[]"),
        "input x is empty (shape (0,)); there is nothing to differentiate"),
    bad("shape-negative", (*CHECK_F, "--shape", "-1"),
        "--shape '-1': every dimension must be positive"),
    bad("shape-zero-size", (*CHECK_F, "--shape", "3,0"),
        "--shape '3,0': every dimension must be positive"),
    bad("shape-not-integers", (*CHECK_F, "--shape", "2,x"),
        "--shape '2,x' must be comma-separated integers, like 2,3"),
    # upstreams
    bad("upstream-wrong-shape", (*SHAPE_3, "--upstream", "[1.0, 2.0]"),
        "upstream for y has shape (2,) but y has shape (3,); TensorFlow would silently"
        " broadcast it, so give an upstream of shape (3,)"),
    bad("upstream-wrong-count", (*SHAPE_3, "--upstream", "ones", "--upstream", "random"),
        "2 --upstream values for 1 outputs (y); give one per output, in order"),
    bad("upstream-strings", (*SHAPE_3, "--upstream", "['a', 'b', 'c']"),
        "upstream \"['a', 'b', 'c']\" has dtype <U1; inputs must be numeric arrays"),
    bad("upstream-boolean", (*SHAPE_3, "--upstream", "[True, False, True]"),
        "upstream for y is boolean; it must be a float array"),
    bad("upstream-nan", (*CHECK_F, "-i", "{data}/three.npy", "--upstream", "{data}/nan3.npy"),
        "upstream for y contains NaN or Inf"),
    bad("upstream-complex-for-a-real-output", (*SHAPE_3, "--upstream", "[1+1j, 2.0, 3.0]"),
        "upstream for y is complex but y is real; its imaginary part would be dropped: give a"
        " real upstream"),
    bad("upstream-npz-unknown-key", (*SHAPE_3, "--upstream", "{data}/extra.npz"),
        "upstream .npz has keys ['x', 'z'] that name no output; outputs are ['y']"),
    # option values
    bad("eps-zero", (*SHAPE_3, "--eps", "0"), "--eps must be positive, got 0.0"),
    bad("eps-negative", (*SHAPE_3, "--eps", "-1e-3"), "--eps must be positive, got -0.001"),
    bad("eps-infinite", (*SHAPE_3, "--eps", "inf"), "--eps must be finite, got inf"),
    bad("eps-below-resolution", (*SHAPE_3, "--eps", "1e-300"),
        "--eps is 1e-300, below float64's resolution (2.2e-16): x + eps x would round back to"
        " x and every difference would be 0; leave it out for the default step"),
    bad("atol-infinite", (*SHAPE_3, "--atol", "inf"), "--atol must be finite, got inf"),
    bad("atol-negative", (*SHAPE_3, "--atol", "-1"), "--atol must be zero or positive, got -1.0"),
    bad("rtol-nan", (*SHAPE_3, "--rtol", "nan"), "--rtol must be zero or positive, got nan"),
    bad("seed-negative", (*SHAPE_3, "--seed", "-1"), "--seed must be at least 0, got -1"),
    bad("probes-zero", (*SHAPE_3, "--probes", "0"), "--probes must be at least 1, got 0"),
    bad("timeout-zero", (*SHAPE_3, "--timeout", "0"),
        "--timeout must be a positive number of seconds, got 0.0"),
    bad("jobs-zero", ("run", "--config", "ci_project/pyproject.toml", "-j", "0"),
        "-j '0' must be a positive number of workers or auto"),
    bad("jobs-word", ("run", "--config", "ci_project/pyproject.toml", "-j", "many"),
        "-j 'many' must be a positive number of workers or auto"),
    bad("surrogate-unknown", ("check", "straight_through.py:quantised_layer", "--surrogate",
                              "ste_rnd"),
        "surrogate 'ste_rnd' is not a tf.custom_gradient that straight_through.py:quantised_layer"
        " uses (its custom gradients: ste_round)"),
    bad("max-memory-overflows", (*SHAPE_3, "--max-memory", "1e400"),
        "--max-memory '1e400' must be a size like 512MiB or 2GiB"),
    bad("format-unknown", (*SHAPE_3, "--format", "xml"),
        "Invalid value for '--format': 'xml' is not one of 'table', 'json', 'junit'."),
    # what the function returns
    bad("returns-none", ("check", "bad/returns_none.py:f"),
        "f returned None; it must return a tensor, a tuple/list or a dict of tensors (a missing"
        " return statement?)"),
    bad("returns-string-tensor", ("check", "bad/returns_string.py:f"),
        "f returns no floating-point tensor to differentiate: y is a tensor of dtype string;"
        " only floating-point outputs have gradients"),
    bad("returns-python-string", ("check", "bad/returns_str.py:f"),
        "f returns no floating-point tensor to differentiate: y is a str, not a tensor"),
    bad("returns-empty-tuple", ("check", "bad/returns_empty.py:f"),
        "f returned an empty tuple, list or dict; it must return at least one floating-point"
        " tensor"),
    bad("returns-empty-tensor", ("check", "bad/returns_empty_tensor.py:f"),
        "f returned an empty tensor: y has shape (0,); every output needs at least one"
        " element"),
    bad("returns-output-nested-5000-deep", ("check", "bad/returns_deeply_nested.py:f"),
        "the arguments or the result of f are nested deeper than Python's recursion limit"
        " allows gradcheck to walk (RecursionError); flatten them"),
    # the function itself fails
    bad("function-raises", ("check", "bad/raises.py:f"),
        "f raised InvalidArgumentError: Matrix size-incompatible: In[0]: [3,3], In[1]: [2,1]"
        " [Op:MatMul] (at bad/raises.py:8)", FUNCTION),
    # raising in float64 (gradcheck's promotion) and in float32: the user's own error is told
    bad("function-raises-in-every-dtype", ("check", "custom_gradient_in_cond.py:traced"),
        "traced raised AttributeError: Tensor.graph is undefined when eager execution is"
        " enabled. (at custom_gradient_in_cond.py:37)", FUNCTION),
    bad("keras3-variable-in-a-tensorflow-api", ("check", "bad/keras3_variable_primals.py:f"),
        "f raised AttributeError: 'str' object has no attribute 'is_floating' (at"
        " bad/keras3_variable_primals.py:13); a Keras 3 variable (keras.Variable) went where"
        " TensorFlow takes a tf.Variable or a tensor: pass its .value, the tf.Variable it"
        " holds", FUNCTION),
    bad("function-calls-sys-exit", ("check", "bad/exits.py:f"),
        "f raised SystemExit: 0 (at bad/exits.py:7)", FUNCTION),
    bad("raises-under-a-gradient-tape-only", ("check", "bad/raises_under_tape.py:f",
                                              "-i", "[5.0, -1.0]"),
        "f raised AttributeError: Tensor.graph is undefined when eager execution is enabled,"
        " under a GradientTape only (it runs without one: a tf.function builds its gradient,"
        " its custom gradients' included, when a tape watches its call)", FUNCTION),
    bad("raises-at-finite-difference-points", ("check", "bad/raises_off_centre.py:f"),
        "f raised ValueError: unexpected value when x moved by a finite-difference step"
        " (at bad/raises_off_centre.py:8)", FUNCTION),
    bad("output-shape-depends-on-values", ("check", "bad/shape_changes.py:f"),
        "f returned an output of shape (3,) when x moved by a finite-difference step, but (2,)"
        " at the given point: an output whose shape depends on the input's values has no"
        " Jacobian there", FUNCTION),
    bad("never-returns", ("check", "bad/hangs.py:f", "--timeout", "2"),
        "f did not finish within 2s (--timeout 2) during the first calls of f and its"
        " gradient; it was running bad/hangs.py:8", FUNCTION),
    bad("import-never-finishes", ("check", "bad/hangs_on_import.py:f", "--timeout", "2"),
        "f did not finish within 2s (--timeout 2) during the loading of"
        " bad/hangs_on_import.py:f and its inputs; it was running bad/hangs_on_import.py:5",
        FUNCTION),
    # gradcheck run
    bad("config-bad-toml", ("run", "--config", "{data}/bad.toml"),
        "cannot parse {data}/bad.toml as TOML: Expected '=' after a key in a key/value pair"
        " (at line 2, column 8)"),
    bad("config-missing-target", ("run", "--config", "{data}/no_target.toml"),
        "tool.gradcheck.check[1].target: missing"),
    bad("config-unknown-key", ("run", "--config", "{data}/unknown_key.toml"),
        "tool.gradcheck.check[0].atoll: unknown key; known keys are accumulate, against, atol,"
        " command, compiled, dtype, eps, input, inputs, loss_scale, mode, name, order, path,"
        " probes, rtol, seed, shape, strategy, surrogate, target, timeout, training, upstream,"
        " wrt"),
    bad("config-nested-5000-deep", ("run", "--config", "{data}/deep.toml"),
        "cannot parse {data}/deep.toml as TOML: it is nested too deeply"),
    bad("run-k-over-10000-checks", ("run", "--config", "{data}/many.toml", "-k", "zzz"),
        "-k 'zzz' matches none of the configured checks (c0, c1, c2, c3, c4, c5, c6, c7, c8, c9"
        " and 9990 more)"),
    bad("config-is-a-folder", ("run", "--config", "{data}/folder.npy"),
        "config file '{data}/folder.npy' is a folder, not a file"),
    bad("config-not-found", ("run", "--config", "{data}/nope.toml"),
        "config file '{data}/nope.toml' not found"),
    bad("run-k-matches-nothing", ("run", "--config", "ci_project/pyproject.toml", "-k", "zzz"),
        "-k 'zzz' matches none of the configured checks (softplus, moments, clipped-identity,"
        " missing-function)"),
]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Broken and odd data files, made fresh for the matrix."""
    folder = tmp_path_factory.mktemp("bad-data")
    np.save(folder / "good.npy", np.array([0.5, 1.0, 2.0, 3.0]))
    (folder / "truncated.npy").write_bytes((folder / "good.npy").read_bytes()[:-8])
    (folder / "empty.npy").write_bytes(b"")
    (folder / "text.npy").write_text("0.5, 1.0\n")
    (folder / "text.npz").write_text("x = [0.5, 1.0]\n")
    np.save(folder / "objects.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    np.save(folder / "strings.npy", np.array(["alpha", "beta"]))
    np.save(folder / "nan.npy", np.array([0.5, np.nan]))
    np.save(folder / "three.npy", np.array([0.5, 1.0, 2.0]))
    np.save(folder / "nan3.npy", np.array([0.5, np.inf, 1.0]))
    np.savez(folder / "extra.npz", x=np.array([0.5, 1.0]), z=np.array([1.0]))
    (folder / "bad.toml").write_text("[[tool.gradcheck.check]]\ntarget ops:f\n")
    (folder / "no_target.toml").write_text(
        '[[tool.gradcheck.check]]\ntarget = "ops:f"\n[[tool.gradcheck.check]]\nname = "g"\n')
    (folder / "unknown_key.toml").write_text(
        '[[tool.gradcheck.check]]\ntarget = "ops:f"\natoll = 1e-6\n')
    with (folder / "huge.npy").open("wb") as handle:
        np.lib.format.write_array_header_1_0(
            handle, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
        handle.write(bytes(16))
    (folder / "nul.py").write_bytes(b"def f(x):\n    return x\x00\n")
    (folder / "folder.py").mkdir()
    (folder / "folder.npy").mkdir()
    os.mkfifo(folder / "pipe.npy")
    (folder / "loop.npy").symlink_to(folder / "loop.npy")
    (folder / "many.toml").write_text("".join(
        f'[[tool.gradcheck.check]]\nname = "c{i}"\ntarget = "ops:f"\n' for i in range(10000)))
    (folder / "deep.toml").write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    return folder


def test_a_columns_variable_that_is_not_a_number_is_ignored(
        in_fixtures: Path, run_cli: Callable[..., Result]) -> None:
    result = run_cli(["check", "two_in_two_out.py:f", "--no-compiled"], env={"COLUMNS": "abc"})
    assert result.exit_code == 0, result.output
    assert result.stderr == "" and "FAILED" not in result.stdout


def test_a_target_syntax_error_answers_without_starting_tensorflow(
        run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    from gradcheck.processes import supervisor

    def never(*args: object) -> None:
        raise AssertionError("a worker was started")

    monkeypatch.setattr(supervisor, "prestart", never)
    for args, message in ((["check", ":"], f"TARGET ':' must be {FORMAT}"),
                          (["vjp", "ops.py:f", "--inputs", "nope"],
                           f"--inputs nope: TARGET 'nope' must be {FORMAT}")):
        result = run_cli(args)
        assert (result.exit_code, result.stderr) == (2, f"Error: {message}\n")


def test_the_matrix_is_large_and_its_ids_unique() -> None:
    assert len(MATRIX) >= 30
    assert len({case.id for case in MATRIX}) == len(MATRIX)


@pytest.mark.parametrize("case", MATRIX, ids=[case.id for case in MATRIX])
def test_bad_input_gives_one_error_line(case: Bad, data: Path, tmp_path: Path, in_fixtures: Path,
                                        run_cli: Callable[..., Result],
                                        request: pytest.FixtureRequest) -> None:
    if "--timeout" in case.args:
        request.getfixturevalue("started_tensorflow")
    report = tmp_path / "report.json"
    args = [arg.replace("{data}", str(data)) for arg in case.args]
    result = run_cli([*args, "-o", str(report)])
    assert result.stderr == "Error: " + case.message.replace("{data}", str(data)) + "\n"
    assert result.exit_code == case.code
    assert "Traceback" not in result.output
    assert not report.exists()


JSON_SAMPLE = [c for c in MATRIX if c.args[0] == "check" and c.id != "format-unknown"][::6]


@pytest.mark.parametrize("case", JSON_SAMPLE, ids=[case.id for case in JSON_SAMPLE])
def test_json_format_still_prints_one_error_object(case: Bad, data: Path, in_fixtures: Path,
                                                   run_cli: Callable[..., Result]) -> None:
    args = [arg.replace("{data}", str(data)) for arg in case.args]
    result = run_cli([*args, "--format", "json"])
    payload = json.loads(result.stdout)
    assert payload["ok"] is False and payload["exit_code"] == case.code
    assert payload["error"] == case.message.replace("{data}", str(data))


@pytest.mark.parametrize(("target", "kind", "status", "words"), [
    ("bad/returns_python_float.py:f", "connected", "fail", "computed outside TensorFlow"),
    ("bad/returns_numpy.py:f", "connected", "fail", "computed outside TensorFlow"),
    ("bad/random_ops.py:f", "nondeterminism", "fail", "returned different values on two calls"),
])
def test_values_from_outside_tensorflow_are_findings_not_errors(
        target: str, kind: str, status: str, words: str, in_fixtures: Path,
        run_cli: Callable[..., Result]) -> None:
    result = run_cli(["check", target, "--format", "json"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and result.stderr == ""
    checks = json.loads(result.stdout)["checks"]
    found = [c for c in checks if c["check"] == kind and c["status"] == status]
    assert found and words in found[0]["message"]
    if kind == "nondeterminism":  # no finite-difference verdict on noise
        assert [c["check"] for c in checks] == ["nondeterminism"]


@pytest.mark.parametrize(("options", "message"), [
    ({"atol": -1.0}, "atol must be zero or positive, got -1.0"),
    ({"rtol": float("inf")}, "rtol must be finite, got inf"),
    ({"mode": "slow"}, "mode must be one of auto, full, fast, got 'slow'"),
    ({"eps": -1e-3}, "eps must be positive, got -0.001"),
    ({"probes": 0}, "probes must be at least 1, got 0"),
    ({"order": 3}, "order must be one of 1, 2, got 3"),
    ({"dtype": "float16"}, "dtype must be one of auto, float32, float64, got 'float16'"),
    ({"max_memory": 10}, "max_memory is 10 bytes, below 1MiB"),
])
def test_the_python_api_refuses_what_the_command_line_refuses(options: dict[str, object],
                                                               message: str) -> None:
    import gradcheck
    from gradcheck.errors import UsageError

    with pytest.raises(ValueError) as caught:  # before anything runs: no false verdict
        gradcheck.check(lambda x: x, [0.5, 1.0], **options)  # type: ignore[arg-type]
    assert isinstance(caught.value, UsageError) and str(caught.value) == message


@pytest.mark.parametrize(("key", "flag", "value", "problem"), [
    ("atol", "--atol", -1.0, "must be zero or positive, got -1.0"),
    ("eps", "--eps", 1e-300, "is 1e-300, below float64's resolution (2.2e-16): x + eps x would"
     " round back to x and every difference would be 0; leave it out for the default step"),
    ("probes", "--probes", 0, "must be at least 1, got 0"),
])
def test_one_validation_for_the_command_line_the_configuration_and_the_api(
        key: str, flag: str, value: float, problem: str, tmp_path: Path,
        run_cli: Callable[..., Result]) -> None:
    import gradcheck
    from gradcheck.load.config import ConfigError, parse_config

    cli = run_cli(["check", "ops.py:f", flag, str(value)])
    assert cli.stderr == f"Error: {flag} {problem}\n"
    with pytest.raises(ConfigError) as config:
        parse_config({"tool": {"gradcheck": {"check": [{"target": "m:f", key: value}]}}},
                     tmp_path / "pyproject.toml")
    assert config.value.message == f"tool.gradcheck.check[0].{key}: {problem}"
    with pytest.raises(ValueError) as api:
        gradcheck.check(lambda x: x, [0.5], **{key: value})  # type: ignore[arg-type]
    assert str(api.value) == f"{key} {problem}"
