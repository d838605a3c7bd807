"""Snapshot the JSON report of every bundled fixture, and compare two snapshots.

    python tools/compare_reports.py snapshot DIR     # one JSON file per fixture function
    python tools/compare_reports.py diff OLD NEW     # what changed, field by field

Used around refactors: behaviour must not change except where a fix says so.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
# Numbers that legitimately move with timing or floating-point summation order.
VOLATILE = ("seconds", "call_seconds")


def targets() -> list[str]:
    """Every fixture function with `<name>_inputs`, as 'fixtures/file.py:name'."""
    import importlib.util

    found = []
    for path in sorted(FIXTURES.glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"_snap_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception:
            continue
        for name, value in vars(module).items():
            if callable(value) and hasattr(module, f"{name}_inputs") and (
                    inspect.isfunction(value) or hasattr(value, "__wrapped__")):
                found.append(f"{path.relative_to(ROOT)}:{name}")
    return found


def snapshot(directory: Path) -> None:
    import gradcheck
    from gradcheck.render.json_format import report_dict

    directory.mkdir(parents=True, exist_ok=True)
    for target in targets():
        try:
            data: Any = report_dict(gradcheck.check(target))
        except Exception as exc:  # an error report is part of the behaviour too
            data = {"error": f"{type(exc).__name__}: {exc}"}
        name = target.replace("/", "_").replace(":", "__") + ".json"
        (directory / name).write_text(json.dumps(data, indent=1, sort_keys=True))
        print(target, "error" if "error" in data else ("ok" if data["ok"] else "not ok"))


def _differences(old: Any, new: Any, where: str) -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new)):
            if key in VOLATILE:
                continue
            if key not in old or key not in new:
                found.append(f"{where}.{key}: {'added' if key in new else 'removed'}")
            else:
                found += _differences(old[key], new[key], f"{where}.{key}")
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (a, b) in enumerate(zip(old, new))
                for d in _differences(a, b, f"{where}[{i}]")]
    if isinstance(old, float) and isinstance(new, float):
        return [] if abs(old - new) <= 1e-9 * max(1.0, abs(old)) else [
            f"{where}: {old!r} -> {new!r}"]
    return [] if old == new else [f"{where}: {str(old)[:160]!r} -> {str(new)[:160]!r}"]


def diff(old_dir: Path, new_dir: Path) -> int:
    changed = 0
    for old in sorted(old_dir.glob("*.json")):
        new = new_dir / old.name
        if not new.exists():
            print(f"{old.name}: missing in {new_dir}")
            changed += 1
            continue
        found = _differences(json.loads(old.read_text()), json.loads(new.read_text()), "")
        for line in found:
            print(f"{old.stem}{line}")
        changed += bool(found)
    for new in sorted(set(p.name for p in new_dir.glob("*.json"))
                      - set(p.name for p in old_dir.glob("*.json"))):
        print(f"{new}: new in {new_dir}")
    print(f"{changed} report(s) differ")
    return 1 if changed else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "snapshot":
        snapshot(Path(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "diff":
        sys.exit(diff(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
