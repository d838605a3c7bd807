"""The hessian check's own finding (the rest are the second-order kind's), and its words."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence, Finding


@dataclasses.dataclass(frozen=True)
class NoArgument(Evidence):
    """A Hessian with no argument to move (only variables)."""

    def words(self, result: Finding) -> str:
        return ("no argument to differentiate twice (variables f reads are not moved for a"
                " Hessian)")
