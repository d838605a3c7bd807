"""The module:attr loader and its error messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradcheck.errors import LoadError
from gradcheck.targets.modules import load_target, split_spec

from .conftest import FIXTURES


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_file_target_loads_function() -> None:
    target = load_target(f"{FIXTURES / 'two_in_two_out.py'}:f")
    assert target.name == "f" and callable(target.function)
    assert target.module.f_inputs[0] == [0.5, -1.0, 2.0]


def test_dotted_module_target_with_path(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "ops.py").write_text("def g(x):\n    return x\n")
    target = load_target("pkg.ops:g", search_path=str(tmp_path))
    assert target.function(3) == 3


def test_class_method_target_binds_an_instance(tmp_path: Path) -> None:
    source = (
        "class Model:\n    scale = 3.0\n    def apply(self, x):\n        return x * self.scale\n"
    )
    path = write(tmp_path, "model_mod.py", source)
    target = load_target(f"{path}:Model.apply")
    assert target.function(2.0) == 6.0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "TARGET is empty; expected 'module:function' or 'path/to/file.py:function'"),
        ("justamodule", "TARGET 'justamodule' must be 'module:function' or"
                        " 'path/to/file.py:function'"),
        ("mod:", "TARGET 'mod:' must be 'module:function' or 'path/to/file.py:function'"),
        ("mod:1bad", "TARGET 'mod:1bad': '1bad' is not a valid attribute path"),
    ],
)
def test_malformed_targets(spec: str, message: str) -> None:
    with pytest.raises(LoadError) as info:
        split_spec(spec)
    assert info.value.message == message


def test_missing_module_is_told_apart_from_import_error_inside(tmp_path: Path) -> None:
    with pytest.raises(LoadError) as missing:
        load_target("no_such_module_xyz:f", search_path=str(tmp_path))
    assert missing.value.message == (
        f"could not import module 'no_such_module_xyz': no module named 'no_such_module_xyz'"
        f" (searched --path {str(tmp_path)!r} and sys.path)"
    )
    write(tmp_path, "needs_dep.py", "import not_installed_dep_abc\n\ndef f(x):\n    return x\n")
    with pytest.raises(LoadError) as inside:
        load_target("needs_dep:f", search_path=str(tmp_path))
    assert inside.value.message.startswith(
        "importing module 'needs_dep' failed: No module named 'not_installed_dep_abc' (at ")
    assert inside.value.message.endswith("needs_dep.py:1)")


def test_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "broken_syntax.py", "def f(x):\n    return x +\n")
    with pytest.raises(LoadError) as info:
        load_target(f"{path}:f")
    assert info.value.message.startswith("syntax error in ")
    assert "broken_syntax.py:2: " in info.value.message


def test_module_raising_at_import(tmp_path: Path) -> None:
    path = write(tmp_path, "raises_on_import.py", "x = 1\nraise ValueError('no config')\n")
    with pytest.raises(LoadError) as info:
        load_target(f"{path}:f")
    assert info.value.message.startswith(
        "importing module 'raises_on_import' raised ValueError: no config (at ")
    assert info.value.message.endswith("raises_on_import.py:2)")


def test_missing_attribute_suggests_close_name(tmp_path: Path) -> None:
    path = write(tmp_path, "has_softplus.py", "def softplus(x):\n    return x\n")
    with pytest.raises(LoadError) as info:
        load_target(f"{path}:softplux")
    assert info.value.message == (
        "attribute 'softplux' not found in module "
        f"{path!r}; did you mean 'softplus'?"
    )


def test_not_callable_and_class(tmp_path: Path) -> None:
    path = write(tmp_path, "odd_things.py", "VALUE = [1, 2]\nclass Model:\n    pass\n")
    with pytest.raises(LoadError) as not_callable:
        load_target(f"{path}:VALUE")
    assert not_callable.value.message == f"'{path}:VALUE' is not callable (it is a list)"
    with pytest.raises(LoadError) as a_class:
        load_target(f"{path}:Model")
    assert a_class.value.message.startswith(f"'{path}:Model' is a class, not a function")


def test_missing_file() -> None:
    with pytest.raises(LoadError) as info:
        load_target("does/not/exist.py:f")
    assert info.value.message == "file 'does/not/exist.py' not found"


def test_suggestions_never_name_an_imported_module(tmp_path: Path) -> None:
    path = write(tmp_path, "uses_numpy.py", "import numpy as np\n\ndef norm(x):\n    return x\n")
    with pytest.raises(LoadError) as info:
        load_target(f"{path}:nope")
    assert info.value.message == f"attribute 'nope' not found in module {path!r}"
