"""Every kind of evidence and note has its words (no TensorFlow): a missing one would raise
only when a finding or note of that kind is shown."""

from __future__ import annotations

import importlib
import pkgutil

import gradcheck.evidence
import gradcheck.kinds
from gradcheck.evidence import Evidence, Location
from gradcheck.evidence.notes import Note
from gradcheck.report import CheckResult, Kind, Status


def _subclasses(base: type) -> set[type]:
    for module in pkgutil.iter_modules(gradcheck.evidence.__path__):
        importlib.import_module(f"gradcheck.evidence.{module.name}")
    for kind in pkgutil.iter_modules(gradcheck.kinds.__path__):
        if kind.ispkg:  # a kind's findings, which say themselves
            importlib.import_module(f"gradcheck.kinds.{kind.name}.evidence")
    found: set[type] = set()
    waiting = [base]
    while waiting:
        for subclass in waiting.pop().__subclasses__():
            if subclass.__module__.startswith("gradcheck.") and subclass not in found:
                found.add(subclass)
                waiting.append(subclass)
    return found


def _unworded(base: type) -> list[str]:
    """The kinds (the classes no other kind derives from: a family's base is never built)
    whose words are the base's, which raise."""
    kinds = _subclasses(base)
    return sorted(kind.__name__ for kind in kinds if not kinds & set(kind.__subclasses__())
                  and getattr(kind, "words", None) is getattr(base, "words", None))


def test_every_evidence_type_has_a_sentence() -> None:
    evidence = _subclasses(Evidence)
    assert len(evidence) > 40
    assert _unworded(Evidence) == []


def test_every_note_type_says_itself() -> None:
    assert _unworded(Note) == []


def test_a_message_is_made_when_read() -> None:
    """The message is rendered from the evidence when first read, and a stale text passed by
    dataclasses.replace is never kept."""
    import dataclasses

    from gradcheck.evidence.connected import Connected

    result = CheckResult(Kind.CONNECTED, Status.PASS, input="x", output="y",
                         evidence=Connected("y", "x"), location=Location("f.py", 3))
    assert "_message" not in result.__dict__
    said = result.message
    assert said and "_message" in result.__dict__
    assert dataclasses.replace(result, message="stale").message == said
    assert CheckResult(Kind.JVP, Status.PASS, "fine").message == "fine"


def test_the_check_finds_an_evidence_type_without_a_sentence() -> None:
    import dataclasses
    import gc

    @dataclasses.dataclass(frozen=True)
    class Unworded(Evidence):
        pass

    Unworded.__module__ = "gradcheck.evidence.unworded"
    assert _unworded(Evidence) == ["Unworded"]
    del Unworded
    gc.collect()
