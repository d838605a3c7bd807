"""The package's shape, read from its source (no TensorFlow): sentences are made only in
gradcheck/render/, from the evidence and notes the core builds."""

from __future__ import annotations

import ast
import dataclasses
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


def _literal(node: ast.AST) -> bool:
    """A string literal or f-string, or a list, tuple or comprehension of them."""
    if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant)
                                           and isinstance(node.value, str)):
        return True
    if isinstance(node, (ast.List, ast.Tuple)):
        return any(_literal(element) for element in node.elts)
    if isinstance(node, ast.ListComp):
        return _literal(node.elt)
    return False


def _noted(call: ast.Call) -> list[ast.AST]:
    """What a call hands on as a note: notes.append(x), self._note(x), note=x, notes=[x]."""
    function = call.func
    said = [keyword.value for keyword in call.keywords if keyword.arg in ("note", "notes")]
    if isinstance(function, ast.Attribute) and call.args and (
            function.attr == "_note" or (function.attr == "append" and ast.unparse(
                function.value).endswith(("notes", "workarounds")))):
        said.append(call.args[0])
    return said


def _worded_notes(name: str, tree: ast.Module) -> list[str]:
    return [f"{name}:{node.lineno}: {ast.unparse(node)[:80]}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and any(_literal(n) for n in _noted(node))]


def test_no_core_module_words_a_note() -> None:
    """Report.notes are typed (gradcheck.evidence.notes): no core module appends a sentence."""
    worded = [line for name, tree in _core_modules() for line in _worded_notes(name, tree)]
    assert worded == []


def test_the_check_finds_a_worded_note() -> None:
    tree = ast.parse('found.notes.append(f"{x} was slow")\n'
                     'self._note("tape.jacobian failed")\n'
                     'Slot(name, note=f"{name} is complex")\n'
                     'Findings(notes=[f"second: {n}" for n in notes])\n'
                     'found.notes.append(PointByPoint(name))\n')
    assert [line.split(":")[1] for line in _worded_notes("checks/x.py", tree)] == [
        "1", "2", "3", "4"]


CAUSE_FACTS = PACKAGE / "evidence" / "causes"


def _facts_classes() -> set[str]:
    return {node.name for path in sorted(CAUSE_FACTS.glob("*.py")) if path.name != "mistakes.py"
            for node in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(node, ast.ClassDef)}


def _is_text(node: ast.expr) -> bool:
    """A string literal, an f-string, or text joined to one."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp):
        return _is_text(node.left) or _is_text(node.right)
    return False


def _worded_causes(name: str, tree: ast.Module, facts: set[str]) -> list[str]:
    """Cause(...) or a cause's facts given text (a culprit is data: names, not words), and
    Words(...) (hand-built causes only)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = _called_name(node)
        if called not in facts | {"Cause"}:
            continue
        given = [a for i, a in enumerate(node.args) if not (called == "Cause" and i == 1)]
        given += [k.value for k in node.keywords if k.arg != "culprit"]
        if called == "Words" or any(_is_text(a) for a in given):
            found.append(f"{name}:{node.lineno}: {ast.unparse(node)[:80]}")
    return found


def test_no_core_module_words_a_cause() -> None:
    """A cause's words (what is wrong, the fix) are said by its facts (gradcheck/evidence/causes):
    the core gives the mistake, the culprit, the location and the facts."""
    facts = _facts_classes()
    worded = [line for name, tree in _core_modules()
              for line in _worded_causes(name, tree, facts)]
    assert worded == []


# The methods in which a finding says itself (and their helpers, named *_words): the only core
# code that may read words.
WORDING_METHODS = frozenset({"words", "clause"})


def _unworded_reads(tree: ast.AST) -> list[int]:
    """The lines that read a cause's words (.what, .fix) outside a wording method."""
    if isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            tree.name in WORDING_METHODS or tree.name.endswith("_words")):
        return []
    read = isinstance(tree, ast.Attribute) and tree.attr in ("what", "fix")
    found = [tree.lineno] if read else []
    return found + [line for child in ast.iter_child_nodes(tree) for line in _unworded_reads(child)]


def test_no_core_module_reads_a_cause_s_words() -> None:
    """Words are output: the core decides from facts, and reads words only where a finding
    says itself (its words and clause methods)."""
    read = [f"{name}:{line}" for name, tree in _core_modules()
            for line in _unworded_reads(tree)]
    assert read == []


def test_the_check_finds_words_read_outside_a_wording_method() -> None:
    tree = ast.parse("def words(self, r):\n    return r.cause.what\n"
                     "def decide(r):\n    return 'x' in r.cause.fix\n")
    assert _unworded_reads(tree) == [4]


def test_a_cause_is_data() -> None:
    from gradcheck.report import Cause

    assert [field.name for field in dataclasses.fields(Cause)] == [
        "mistake", "culprit", "location", "facts"]


def test_the_check_finds_a_worded_cause() -> None:
    tree = ast.parse('Cause(Mistake.KINK, "f", facts=Kinked(name, f"at {x}"))\n'
                     'Cause(Mistake.ZEROS, site, where, Words(what))\n'
                     'Cause(Mistake.ZEROS, "custom_gradient f", where, ReturnedValues(2.0))\n'
                     'Cause(Mistake.ZEROS, fix="do " + this)\n')
    found = _worded_causes("checks/x.py", tree, _facts_classes())
    assert sorted(line.split(":")[1] for line in found) == ["1", "2", "4"]
