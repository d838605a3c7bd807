"""[tool.gradcheck] parsing: the sample project, path anchoring, -k selection, exact errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gradcheck.errors import ExitCode
from gradcheck.load.config import ConfigError, load_config, parse_config
from tests.conftest import FIXTURES

SAMPLE = FIXTURES / "ci_project" / "pyproject.toml"
SOURCE = Path("/project/pyproject.toml")


def config(*checks: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"tool": {"gradcheck": {**top, "check": list(checks)}}}


def error_of(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, SOURCE)
    assert caught.value.exit_code == ExitCode.USAGE_ERROR
    return caught.value.message


def test_sample_project_is_read_with_paths_anchored_at_its_folder() -> None:
    loaded = load_config(str(SAMPLE))
    folder = str(SAMPLE.parent.resolve())
    assert [c.name for c in loaded.checks] == [
        "softplus", "moments", "clipped-identity", "missing-function"]
    assert loaded.timeout == 60
    softplus, moments, clipped, _ = loaded.checks
    assert softplus.target == softplus.load_target == "ops:softplus"
    assert softplus.input == ("[0.5, -1.0, 3.0]",) and softplus.upstream == ("random",)
    assert softplus.path == str(Path(folder) / ".")
    assert moments.target == "ops.py:moments"
    assert moments.load_target == f"{folder}/ops.py:moments"
    assert moments.options.rtol == 1e-5 and moments.upstream == ("ones",)
    assert clipped.shape == ("3",) and clipped.command == "vjp"


def test_nearest_pyproject_is_found_from_a_subfolder(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[[tool.gradcheck.check]]\ntarget = "pkg.ops:f"\nshape = ["2,3", [4]]\n')
    (tmp_path / "src" / "deep").mkdir(parents=True)
    loaded = load_config(start=tmp_path / "src" / "deep")
    assert loaded.source == tmp_path / "pyproject.toml"
    (check,) = loaded.checks
    assert check.name == "pkg.ops:f" and check.shape == ("2,3", "4")
    assert check.path == str(tmp_path / ".")


def test_file_values_are_anchored_but_literals_and_keywords_are_not() -> None:
    check, provided = parse_config(config({
        "target": "f.py:f", "input": ["x=data/x.npy", "[1.0, 2.0]", "/abs/y.npy"],
        "upstream": ["u.npz", "ones"], "path": "src",
    }, {"target": "pkg.mod:g", "inputs": "lib/provide.py:args"}), SOURCE).checks
    assert check.input == ("x=/project/data/x.npy", "[1.0, 2.0]", "/abs/y.npy")
    assert check.upstream == ("/project/u.npz", "ones")
    assert check.path == "/project/src"
    assert check.load_target == "/project/f.py:f" and check.target == "f.py:f"
    assert provided.inputs == "/project/lib/provide.py:args"
    assert provided.load_target == "pkg.mod:g" and provided.path == "/project"


@pytest.mark.parametrize(("pattern", "selected"), [
    (None, ["soft", "softer", "hard"]), ("soft", ["soft", "softer"]), ("s*t", ["soft"]),
    ("h?rd", ["hard"]), ("nothing", []),
])
def test_k_selects_by_substring_or_glob(pattern: str | None, selected: list[str]) -> None:
    loaded = parse_config(config(*({"name": n, "target": "m:f"} for n in
                                   ("soft", "softer", "hard"))), SOURCE)
    assert [c.name for c in loaded.select(pattern)] == selected


@pytest.mark.parametrize(("data", "message"), [
    (config({"name": "a"}), "tool.gradcheck.check[0].target: missing"),
    (config({"target": "m:f"}, {"target": "m:g"}, {"shape": [[2]]}),
     "tool.gradcheck.check[2].target: missing"),
    (config({"target": "m:f", "colour": "red"}),
     "tool.gradcheck.check[0].colour: unknown key; known keys are"
     " accumulate, against, atol, command, compiled, dtype, eps, input, inputs, loss_scale,"
     " mode, name, order, path, probes, rtol, seed, shape, strategy, surrogate, target,"
     " timeout, training, upstream, wrt"),
    ({"tool": {"gradcheck": {"chek": []}}},
     "tool.gradcheck.chek: unknown key; known keys are check, path, timeout"),
    (config({"target": "garbled"}),
     "tool.gradcheck.check[0].target: TARGET 'garbled' must be 'module:function' or"
     " 'path/to/file.py:function'"),
    (config({"target": 3}), "tool.gradcheck.check[0].target: expected a string, got 3 (integer)"),
    (config({"target": "m:f", "atol": "1e-6"}),
     "tool.gradcheck.check[0].atol: expected a number, got '1e-6' (string)"),
    (config({"target": "m:f", "atol": -1.0}),
     "tool.gradcheck.check[0].atol: must be zero or positive, got -1.0"),
    (config({"target": "m:f", "eps": 0}), "tool.gradcheck.check[0].eps: must be positive, got 0.0"),
    (config({"target": "m:f", "timeout": -5}),
     "tool.gradcheck.check[0].timeout: must be a positive number of seconds, got -5.0"),
    (config({"target": "m:f", "seed": -1}), "tool.gradcheck.check[0].seed: must be at least 0,"
                                            " got -1"),
    (config({"target": "m:f", "probes": True}),
     "tool.gradcheck.check[0].probes: expected an integer, got True (boolean)"),
    (config({"target": "m:f", "mode": "quick"}),
     "tool.gradcheck.check[0].mode: must be one of auto, full, fast, got 'quick'"),
    (config({"target": "m:f", "command": "run"}),
     "tool.gradcheck.check[0].command: expected one of check, jacobian, vjp, hessian, got 'run'"),
    (config({"target": "m:f", "shape": [3, 4]}),
     "tool.gradcheck.check[0].shape[0]: expected a shape like [3, 4] or \"3,4\", got 3"),
    (config({"target": "m:f", "shape": [[3, 0]]}),
     "tool.gradcheck.check[0].shape[0]: every dimension must be positive, got [3, 0]"),
    (config({"target": "m:f", "input": ["[1.0]", 2.0]}),
     "tool.gradcheck.check[0].input[1]: expected a string, got 2.0 (number)"),
    (config({"target": "m:f", "input": ["[1.0]"], "shape": [[1]]}),
     "tool.gradcheck.check[0]: give only one of input, shape and inputs (got input, shape)"),
    (config({"target": "m:f"}, {"target": "m:f"}),
     "tool.gradcheck.check[1].name: 'm:f' is already the name of check[0]; give each check a"
     " distinct name"),
    (config(), "tool.gradcheck.check: empty; add at least one [[tool.gradcheck.check]] table"),
    ({"tool": {"gradcheck": {"path": "src"}}},
     "tool.gradcheck.check: missing; add at least one [[tool.gradcheck.check]] table"),
    ({"tool": {"gradcheck": {"check": {"target": "m:f"}}}},
     "tool.gradcheck.check: expected an array of tables ([[tool.gradcheck.check]]), got table"),
    ({"tool": {"gradcheck": {"check": ["m:f"]}}},
     "tool.gradcheck.check[0]: expected a table ([[tool.gradcheck.check]]), got string"),
    ({"tool": {"gradcheck": {"timeout": 0, "check": []}}},
     "tool.gradcheck.timeout: must be a positive number of seconds, got 0.0"),
    ({"tool": {"black": {}}},
     "/project/pyproject.toml: no [tool.gradcheck] table; add [[tool.gradcheck.check]] tables"
     " to it"),
])
def test_configuration_errors_name_the_table_and_key(data: dict[str, Any], message: str) -> None:
    assert error_of(data) == message


@pytest.mark.parametrize(("text", "message"), [
    ("[tool.gradcheck\n", "cannot parse {path} as TOML: Expected ']' at the end of a table"
                          " declaration (at line 1, column 16)"),
    ("[[tool.gradcheck.check]]\ntarget = m:f\n", "cannot parse {path} as TOML: Invalid value"
                                                 " (at line 2, column 10)"),
])
def test_bad_toml_is_a_one_line_config_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "gradcheck.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    assert caught.value.message == message.format(path=path)


def test_missing_and_non_utf8_config_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="^config file 'nope.toml' not found$"):
        load_config("nope.toml")
    with pytest.raises(ConfigError, match="is a folder, not a file$"):
        load_config(str(tmp_path))
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b"# caf\xe9\n")
    with pytest.raises(ConfigError, match="it is not UTF-8 text$"):
        load_config(str(latin))


def test_no_pyproject_anywhere_up_the_tree(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="give --config FILE$"):
        load_config(start=tmp_path)


def test_surrogate_names_are_read() -> None:
    run = parse_config(config({"target": "ops:f", "surrogate": ["ste_round", "clip"]}), SOURCE)
    assert run.checks[0].options.surrogates == {"ste_round", "clip"}
    assert error_of(config({"target": "ops:f", "surrogate": 3})) == (
        "tool.gradcheck.check[0].surrogate: expected a string or an array of strings, got"
        " integer")
    assert error_of(config({"target": "ops:f", "surrogate": ["ste_round", 3]})) == (
        "tool.gradcheck.check[0].surrogate[1]: expected a string, got 3 (integer)")


def _project(tmp_path: Path, top: str) -> Path:
    """A project whose module lives in src/, and a folder below it to run from."""
    (tmp_path / "pyproject.toml").write_text(f"[tool.gradcheck]\n{top}\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "mymod.py").write_text(
        "import tensorflow as tf\n\n\ndef f(x):\n    return tf.sin(x)\n")
    (tmp_path / "docs").mkdir()
    return tmp_path / "docs"


def test_check_takes_path_from_tool_gradcheck_as_run_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Any) -> None:
    monkeypatch.chdir(_project(tmp_path, 'path = "src"\ntimeout = 600'))
    result = run_cli(["check", "mymod:f", "-i", "[1.0, 2.0]", "-q"])
    assert result.exit_code == 0, result.output
    assert run_cli(["check", "mymod:f", "--path", ".", "-q"]).exit_code == 2  # the flag wins


def test_check_reads_the_timeout_of_tool_gradcheck_and_its_errors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Any) -> None:
    monkeypatch.chdir(_project(tmp_path, "timeout = -1"))
    result = run_cli(["check", "mymod:f", "--path", "../src"])
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: tool.gradcheck.timeout: ")
