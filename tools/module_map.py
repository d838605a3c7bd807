"""Print the map of a folder's modules, each with the first sentence of its docstring.

    python tools/module_map.py            # gradcheck/: the package, module by module
    python tools/module_map.py tests      # the tests, by the behaviour each module covers

The map is made from the docstrings, so it is never out of date; tests/test_docs.py checks
that every module has one.
"""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 100
NAME_WIDTH = 36


def first_sentence(path: Path) -> str | None:
    """The docstring's first sentence (up to its first period and space), on one line."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    if not docstring:
        return None
    paragraph = " ".join(docstring.split("\n\n")[0].split())
    return re.split(r"(?<=[.:;])\s(?=[A-Z`])", paragraph, maxsplit=1)[0]


def module_map(folder: Path) -> list[str]:
    """One entry per module (a package by its __init__.py), indented by depth."""
    lines = []
    for path in sorted(folder.rglob("*.py")):
        relative = path.relative_to(folder)
        depth = len(relative.parts) - 1
        is_package = path.name == "__init__.py"
        if is_package and depth == 0:
            continue
        name = f"{relative.parts[-2]}/" if is_package else path.name
        depth -= 1 if is_package else 0
        label = "  " * depth + name
        words = first_sentence(path) or "(no docstring)"
        wrapped = textwrap.wrap(words, WIDTH - NAME_WIDTH) or [""]
        lines.append(f"{label:<{NAME_WIDTH - 1}} {wrapped[0]}")
        lines += [" " * NAME_WIDTH + more for more in wrapped[1:]]
    return lines


def main(arguments: list[str]) -> int:
    folder = ROOT / (arguments[0] if arguments else "gradcheck")
    print(f"{folder.name}/")
    print("\n".join("  " + line for line in module_map(folder)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
