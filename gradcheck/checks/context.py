"""What every check reads (f recorded, options, run settings, tolerance, upstreams) and how it
reports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcheck.check_settings import CheckSettings
from gradcheck.engine.program import Evaluation, OutputLeaf, Program
from gradcheck.engine.recording import Recording
from gradcheck.evidence.notes import Note
from gradcheck.numerics.tolerances import Tolerance, fd_tolerance
from gradcheck.options import CheckOptions
from gradcheck.report import Block, CheckResult, Kind, Status

# Blocks up to this many elements carry their matrices in the report details.
SHOWN_BLOCK_SIZE = 64


@dataclass(frozen=True)
class CheckContext:
    """Read-only for the checks: each returns its own results."""

    recording: Recording
    options: CheckOptions
    settings: CheckSettings
    tolerance: Tolerance
    tolerance_dtype: str
    upstreams: tuple[np.ndarray, ...]
    diff_outputs: tuple[int, ...]

    @property
    def program(self) -> Program:
        return self.recording.program

    @property
    def evaluation(self) -> Evaluation:
        """How f is evaluated: its dtype (the tolerance's), vectorisation, sources."""
        return self.recording.program.evaluation

    @property
    def outputs(self) -> list[OutputLeaf]:
        return self.recording.outputs

    @property
    def fd_tolerance(self) -> Tolerance:
        """The tolerance of full-mode comparisons with finite differences."""
        return fd_tolerance(self.tolerance, self.evaluation.dtype, self.options.atol,
                            self.options.rtol)

    @property
    def random_upstreams(self) -> bool:
        """Whether every upstream is gradcheck's random one (the user gave none)."""
        return all(isinstance(spec, str) and spec == "random" for spec in self.options.upstream)

    def wants(self, kind: Kind) -> bool:
        return kind in self.options.kinds


@dataclass
class Findings:
    """Results and notes one check function collects and returns."""

    results: list[CheckResult] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)

    def add(self, check: Kind, status: Status, message: str = "", **fields: Any) -> None:
        self.results.append(CheckResult(check=check, status=status, message=message, **fields))

    def extend(self, other: Findings | Sequence[CheckResult]) -> None:
        """Add what another check found (its Findings, or its results alone)."""
        if not isinstance(other, Findings):
            self.results += other
            return
        self.results += other.results
        self.blocks += other.blocks
        self.notes += [note for note in other.notes if note not in self.notes]


def shown(block: np.ndarray | None) -> list[Any] | None:
    """A block's matrix for the report details, when small enough to show."""
    if block is None or block.size > SHOWN_BLOCK_SIZE:
        return None
    return np.asarray(block).tolist()
