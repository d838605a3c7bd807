"""Validation against the junit-10.xsd of tests/data (Jenkins xUnit), with lxml."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

SCHEMA_FILE = Path(__file__).resolve().parent / "data" / "junit-10.xsd"


@cache
def _schema() -> Any:
    etree = pytest.importorskip("lxml.etree")
    return etree.XMLSchema(etree.parse(str(SCHEMA_FILE)))


def junit_10_errors(xml: str | bytes | Path) -> list[str]:
    """The schema's complaints about a JUnit document (a path or its text); [] when valid."""
    from lxml import etree

    schema = _schema()
    data = xml.read_bytes() if isinstance(xml, Path) else (
        xml.encode() if isinstance(xml, str) else xml)
    document = etree.fromstring(data, etree.XMLParser(remove_blank_text=False))
    if schema.validate(document):
        return []
    return [f"line {e.line}: {e.message}" for e in schema.error_log]
