"""A place in the user's source, as findings and causes carry it."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Location:
    """A place in the user's source: the path (relative to the current directory when under
    it) and the line, when known. Shown and published in JSON as "path:line"; a Jupyter cell's
    (`cell`: its execution count) as IPython writes it, "Cell In[2], line 5"."""

    path: str
    line: int | None = None
    cell: int | None = None

    def __str__(self) -> str:
        if self.cell is not None:
            return f"Cell In[{self.cell}]" + ("" if self.line is None else f", line {self.line}")
        return self.path if self.line is None else f"{self.path}:{self.line}"
