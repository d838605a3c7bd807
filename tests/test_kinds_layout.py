"""Each check kind in one folder (gradcheck/kinds/<kind>/), reached by one registry line: read
from the source and the registry (no TensorFlow runs)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path

from gradcheck.evidence import Evidence
from gradcheck.kinds.registry import ELSEWHERE, KINDS
from gradcheck.report import CheckResult, Kind, Status

PACKAGE = Path(__file__).resolve().parent.parent / "gradcheck"
FOLDERS = sorted(p.parent for p in (PACKAGE / "kinds").glob("*/__init__.py"))
# Every folder holds these; `tf` (its TensorFlow part) and `judging` (NumPy only) when needed.
REQUIRED = ("__init__", "check", "evidence")
# Modules outside gradcheck/kinds/ that read a kind besides the registry, and why.
READERS: dict[str, frozenset[str]] = {
    # MirroredStrategy's logical devices are set up before TensorFlow starts.
    "strategy": frozenset({"gradcheck.pipeline"}),
    # The diagnosis places a failing precision finding at the first op that overflows.
    "precision": frozenset({"gradcheck.diagnosis.diagnose"}),
    # Runs where the other TARGET is loaded (registry.ELSEWHERE).
    "against": frozenset({"gradcheck.pipeline"}),
    # The non-finite diagnosis places a forward mode that is not finite at its op.
    "jvp": frozenset({"gradcheck.diagnosis.non_finite"}),
    # The diagnosis runs the non-finite analysis on a compiled variant whose VJP alone is not
    # finite, and blames XLA's own gradient (a tf.where's, a complex kernel's) for a failing
    # finding of the XLA variant.
    "compiled": frozenset({"gradcheck.diagnosis.non_finite",
                           "gradcheck.diagnosis.tensorflow_gradients"}),
    # Judged from what gradcheck.Watch recorded, in a snapshot's diagnosis (registry.ELSEWHERE).
    "health": frozenset({"gradcheck.training.step"}),
    # The sweep runs first in the report's assembly, which explains the inputs it judged; the
    # diagnosis reads a disagreement's facts; the renderers draw its blocks (its evidence).
    "jacobian": frozenset({"gradcheck.checks.run", "gradcheck.checks.explain",
                           "gradcheck.diagnosis.diagnose", "gradcheck.render.blocks",
                           "gradcheck.render.heatmap", "gradcheck.render.html",
                           "gradcheck.render.table"}),
    # Run after the sweep, against its blocks; --explain and the renderers read its evidence.
    "vjp": frozenset({"gradcheck.checks.run", "gradcheck.checks.explain",
                      "gradcheck.render.blocks"}),
    # f changing between calls stops every other check: the report's assembly asks it first.
    "nondeterminism": frozenset({"gradcheck.checks.run"}),
}


def _kind(folder: Path) -> Kind:
    return Kind(folder.name.replace("_", "-"))


def _importers(name: str) -> set[str]:
    """The package modules outside gradcheck/kinds/ that import from gradcheck.kinds.<name>
    (a kind may borrow from another: accumulation splits the batch as strategy does)."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if module.startswith("gradcheck.kinds.") and module != "gradcheck.kinds.registry":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    f"gradcheck.kinds.{name}"):
                found.add(module)
    return found


def test_each_kind_folder_holds_its_parts() -> None:
    assert FOLDERS
    for folder in FOLDERS:
        modules = {p.stem for p in folder.glob("*.py")}
        assert set(REQUIRED) <= modules, (folder.name, modules)


def test_the_registry_has_one_line_per_kind_folder_and_no_kind_twice() -> None:
    registered = [entry.kind for entry in KINDS]
    assert len(registered) == len(set(registered)) and not set(registered) & set(ELSEWHERE)
    for folder in FOLDERS:
        if _kind(folder) in ELSEWHERE:
            continue
        [entry] = [e for e in KINDS if e.kind == _kind(folder)]
        assert entry.check.__module__ == f"gradcheck.kinds.{folder.name}.check"


def test_a_kind_folder_is_reached_through_the_registry_only() -> None:
    """Adding a kind touches its folder, its registry line and its Kind value: nothing else in
    the package imports it (tests and docs aside)."""
    for folder in FOLDERS:
        allowed = {"gradcheck.kinds.registry"} | READERS.get(folder.name, frozenset())
        assert _importers(folder.name) <= allowed, folder.name


def test_a_kind_s_findings_say_themselves() -> None:
    """Every evidence class in a kind's folder that no other derives from (a family's base is
    never built) has its own `words`: a finding's message is made of them."""
    for folder in FOLDERS:
        module = importlib.import_module(f"gradcheck.kinds.{folder.name}.evidence")
        classes = [c for c in vars(module).values() if isinstance(c, type)
                   and issubclass(c, Evidence) and c is not Evidence
                   and c.__module__ == module.__name__]
        assert classes, folder.name
        leaves = [c for c in classes if not c.__subclasses__()]
        assert all(c.words is not Evidence.words for c in leaves), folder.name


def test_the_dispatcher_reads_a_finding_s_own_words() -> None:
    from gradcheck.kinds.accumulation.evidence import AccumulatedGradient

    evidence = AccumulatedGradient("sum", 4, 0.75, 0.25)
    result = CheckResult(Kind.ACCUMULATION, Status.FAIL, evidence=evidence)
    assert evidence.words(result) == result.message
    assert "is 1/4 of the whole batch's" in result.message
    assert "words" not in {f.name for f in dataclasses.fields(evidence)}
    assert evidence.published() == {"state": "sum", "micro_batches": 4, "error": 0.75,
                                     "ratio": 0.25, "batch_norm": False}
