"""The package's shape, read from its source (no TensorFlow): sentences are made only in
gradcheck/render/, from the evidence the core builds."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gradcheck"
# Findings.add's own definition: its `message` parameter is what hand-built results use.
FINDINGS_ADD = "checks/context.py"


def _core_modules() -> list[tuple[str, ast.Module]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name.startswith("render/"):
            continue
        found.append((name, ast.parse(path.read_text(encoding="utf-8"), filename=name)))
    return found


def _called_name(call: ast.Call) -> str:
    function = call.func
    if isinstance(function, ast.Attribute):
        return function.attr
    return function.id if isinstance(function, ast.Name) else ""


def _worded(call: ast.Call, positional_message: int) -> bool:
    """Whether a CheckResult(...) or Findings.add(...) call gives a message: by keyword, or
    positionally after the check and status."""
    if any(keyword.arg == "message" for keyword in call.keywords):
        return True
    return len([a for a in call.args if not isinstance(a, ast.Starred)]) > positional_message


def _worded_findings(name: str, tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = _called_name(node)
        is_result = called == "CheckResult"
        if is_result and name == FINDINGS_ADD:
            continue  # Findings.add passing its (hand-built) message on
        if (is_result or called == "add") and _worded(node, 2):
            found.append(f"{name}:{node.lineno}: {ast.unparse(node)[:80]}")
    return found


def test_no_core_module_words_a_finding() -> None:
    """CheckResult(..., message=...) and Findings.add(check, status, "text") are built only
    by renderers and tests; the core gives evidence (and the diagnosis an attribution)."""
    worded = [line for name, tree in _core_modules() for line in _worded_findings(name, tree)]
    assert worded == []


def test_the_check_finds_a_worded_finding() -> None:
    tree = ast.parse('found.add(Kind.JVP, Status.FAIL, f"{x} differs")\n'
                     'CheckResult(Kind.JVP, Status.PASS, message="fine")\n'
                     'CheckResult(Kind.JVP, Status.PASS, evidence=Agree())\n')
    assert [line.split(":")[1] for line in _worded_findings("checks/x.py", tree)] == ["1", "2"]
