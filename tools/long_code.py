"""Report the functions over 60 lines and the modules over 400 lines in gradcheck.

    python tools/long_code.py        # a report to read, not a gate: it always exits 0

A size is a hint where to look, never a reason to split by itself (split by what the code
does). A function's length runs from its `def` (decorators excluded) to its last line.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400


def long_functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


def main() -> int:
    found = 0
    for path in sorted((ROOT / "gradcheck").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            print(f"{name}: module of {lines} lines")
            found += 1
        for function, length in long_functions(path):
            print(f"{name}: {function} has {length} lines")
            found += 1
    print(f"{found} found over {MAX_FUNCTION_LINES} lines (a function) or {MAX_MODULE_LINES}"
          " (a module)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
