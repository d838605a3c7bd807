"""Jacobian blocks as matrices for pictures, heatmaps and --save: rows are the output's
elements, columns the input's (row-major), with the excess |AD - FD| / allowed per element."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.evidence.gradients import CutPath
from gradcheck.kinds.jacobian.evidence import JacobianSymmetric
from gradcheck.kinds.vjp.evidence import VjpSymmetric
from gradcheck.report import Block, CheckResult, Kind, Report, Status

# A cut path recorded only through the connected check's details (no Block): elements whose
# |FD| is above this fraction of the block's largest are the dependence autodiff misses.
CUT_PATH_FRACTION = 1e-6


@dataclass(frozen=True)
class BlockView:
    """One (output, input) block, flattened to a matrix, with what to outline."""

    output: str
    input: str
    output_shape: tuple[int, ...]
    input_shape: tuple[int, ...]
    # (rows, columns); None when autodiff returned None (the path is cut).
    autodiff: np.ndarray | None
    finite_difference: np.ndarray
    # |AD - FD| / allowed (> 1 fails); NaN where the element is not judged (a kink).
    excess: np.ndarray
    failing: np.ndarray
    # How the excess was measured: "allowed" (atol + rtol·|J| + the FD error estimate) or
    # "block-scale" (a cut path without a recorded tolerance: |FD| / max |FD| / CUT_PATH_FRACTION).
    measure: str
    status: str | None
    notes: tuple[str, ...] = ()
    # The verdict's likely cause, in a line: "likely cause: grad_fn uses J where Jᵀ is needed
    # (it returns J·u instead of uᵀJ), custom_gradient f (line 9) at ...", and its Mistake's
    # tag ("transposed") for scripts.
    cause: str | None = None
    mistake: str | None = None

    @property
    def name(self) -> str:
        return f"{self.output}/{self.input}"

    @property
    def shape(self) -> tuple[int, int]:
        rows, columns = self.finite_difference.shape
        return int(rows), int(columns)

    @property
    def worst(self) -> tuple[int, int] | None:
        """(row, column) of the largest excess (non-finite first), or None for an empty block."""
        if self.excess.size == 0:
            return None
        ranked = np.where(np.isnan(self.excess), -1.0,
                          np.where(np.isfinite(self.excess), self.excess, np.inf))
        row, column = np.unravel_index(int(np.argmax(ranked)), ranked.shape)
        return int(row), int(column)

    @property
    def max_excess(self) -> float:
        judged = self.excess[~np.isnan(self.excess)]
        return float(np.max(judged)) if judged.size else 0.0

    def output_index(self, row: int) -> tuple[int, ...]:
        return element_index(self.output_shape, row)

    def input_index(self, column: int) -> tuple[int, ...]:
        return element_index(self.input_shape, column)


def element_index(shape: Sequence[int], flat: int) -> tuple[int, ...]:
    """The multi-index of a row-major flat position (() for a scalar)."""
    if not shape:
        return ()
    return tuple(int(i) for i in np.unravel_index(flat, tuple(shape)))


def slug(text: str) -> str:
    """A file-name-safe form of a tensor name: y['mean'] -> y_mean."""
    cleaned = re.sub(r"[^A-Za-z0-9.-]+", "_", text).strip("_.")
    return cleaned or "tensor"


def excess_of(autodiff: np.ndarray, reference: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """|autodiff - reference| / allowed, as the jacobian check judges it: 0 for an exact match,
    inf where autodiff is not finite, NaN where allowed is NaN (not judged)."""
    autodiff = np.asarray(autodiff, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    allowed = np.asarray(allowed, dtype=np.float64)
    error = np.abs(autodiff - reference)
    error = np.where(np.isfinite(autodiff), error, np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        excess = np.where(error == 0, 0.0, error / allowed)
    return np.where(np.isnan(allowed), np.nan, excess)


def _shape_of(infos: Sequence[Any], name: str, fallback: tuple[int, ...]) -> tuple[int, ...]:
    for info in infos:
        if info.name == name:
            return tuple(int(d) for d in info.checked_shape)
    return fallback


def _verdict(report: Report, output: str, input_name: str) -> CheckResult | None:
    """The jacobian (else connected) result of this block."""
    for kind in (Kind.JACOBIAN, Kind.CONNECTED):
        for result in report.checks:
            if result.check == kind and result.output == output and result.input == input_name:
                return result
    return None


def _symmetrise(block: np.ndarray) -> np.ndarray:
    """(G + Gᵀ)/2 over the input's two matrix axes (the last two of a block)."""
    return (block + np.swapaxes(block, -1, -2)) / 2.0


def _matrix(values: Any, rows: int, columns: int) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).reshape(rows, columns)


def cut_path_blocks(report: Report) -> list[Block]:
    """Blocks for failing connected checks (autodiff None) that the report kept no Block for,
    from the finite differences in the check's details (recorded for small blocks only)."""
    kept = {(block.output, block.input) for block in report.blocks}
    found = []
    for result in report.checks:
        if (result.check != Kind.CONNECTED or result.status != Status.FAIL
                or result.output is None or result.input is None
                or (result.output, result.input) in kept):
            continue
        cut = result.evidence
        fd = cut.finite_difference if isinstance(cut, CutPath) else None
        if fd is None:
            continue
        kept.add((result.output, result.input))
        found.append(Block(result.output, result.input, None, np.asarray(fd, dtype=np.float64),
                           None, None, None))
    return found


def all_blocks(report: Report) -> list[Block]:
    """Report.blocks, then cut-path blocks rebuilt from the connected check's details."""
    return [*report.blocks, *cut_path_blocks(report)]


def _view(report: Report, block: Block) -> BlockView:
    fd_full = np.asarray(block.finite_difference, dtype=np.float64)
    output_shape = _shape_of(report.outputs, block.output, tuple(np.shape(block.upstream)))
    input_shape = _shape_of(report.inputs, block.input,
                            tuple(fd_full.shape[len(output_shape):]))
    rows, columns = math.prod(output_shape), math.prod(input_shape)
    verdict = _verdict(report, block.output, block.input)
    notes: list[str] = []
    autodiff_full = (None if block.autodiff is None
                     else np.asarray(block.autodiff, dtype=np.float64))
    if autodiff_full is None:
        notes.append("autodiff returned None (the path is cut): drawn as 0")
    allowed = block.allowed
    if (verdict is not None and isinstance(verdict.evidence, (JacobianSymmetric, VjpSymmetric))
            and len(input_shape) >= 2 and input_shape[-1] == input_shape[-2]):
        fd_full = _symmetrise(fd_full)
        if allowed is not None:
            allowed = _symmetrise(np.asarray(allowed, dtype=np.float64))
        notes.append("finite differences: the symmetric part (G + Gᵀ)/2, TensorFlow's"
                     " convention for ops on symmetric matrices")
    fd = _matrix(fd_full, rows, columns)
    ad = None if autodiff_full is None else _matrix(autodiff_full, rows, columns)
    if allowed is not None:
        excess = excess_of(ad if ad is not None else np.zeros_like(fd), fd,
                           _matrix(allowed, rows, columns))
        measure = "allowed"
        if np.isnan(excess).any():
            notes.append(f"{int(np.isnan(excess).sum())} element(s) at a kink, not judged")
    else:
        scale = float(np.max(np.abs(fd), initial=0.0))
        excess = (np.abs(fd) / (CUT_PATH_FRACTION * scale) if scale > 0
                  else np.zeros_like(fd))
        measure = "block-scale"
        notes.append(f"no tolerance recorded: elements with |FD| above {CUT_PATH_FRACTION:g}"
                     " of the block's largest are outlined")
    failing = (excess > 1.0) | np.isinf(excess)
    return BlockView(block.output, block.input, output_shape, input_shape, ad, fd, excess,
                     failing, measure, None if verdict is None else str(verdict.status),
                     tuple(notes), _cause_line(verdict),
                     None if verdict is None or not verdict.failed or verdict.cause is None
                     else str(verdict.cause.mistake.value))


def _cause_words(what: str) -> str:
    """A cause's words without the numbers the picture itself shows: up to its first ": " or
    "; " outside brackets, or its "(autodiff and finite differences disagree ...)"."""
    depth = 0
    for index, character in enumerate(what):
        if character in "([":
            if depth == 0 and what.startswith(" (autodiff", index - 1):
                return what[:index - 1]
            depth += 1
        elif character in ")]":
            depth = max(0, depth - 1)
        elif depth == 0 and what.startswith((": ", "; "), index):
            return what[:index]
    return what


def _cause_line(verdict: CheckResult | None) -> str | None:
    cause = None if verdict is None or not verdict.failed else verdict.cause
    if cause is None:
        return None
    line = f"likely cause: {_cause_words(cause.what)}"
    if cause.culprit:
        line += f", {cause.culprit}"
    if cause.location:
        line += f" at {cause.location}"
    return line


def block_views(report: Report) -> list[BlockView]:
    """Every block the report kept (Report.blocks, CheckSettings(keep_blocks=True)), and the
    cut paths, as matrices."""
    return [_view(report, block) for block in all_blocks(report)]


def skipped_blocks(report: Report) -> list[str]:
    """Failing (output, input) pairs that have no numbers to draw, and why."""
    drawn = {(block.output, block.input) for block in all_blocks(report)}
    reasons: dict[tuple[str, str], str] = {}
    for result in report.sorted_checks():
        pair = (result.output or "", result.input or "")
        if not result.failed or not all(pair) or pair in drawn or pair in reasons:
            continue
        if result.check == Kind.GRAD_SHAPE:
            reasons[pair] = "the gradient has the wrong shape, so there is no Jacobian block"
        elif result.check == Kind.CONNECTED:
            reasons[pair] = "the path is cut and the block is too large to be in the report"
        elif result.check == Kind.FAST:
            reasons[pair] = "fast mode checks random projections, not a Jacobian block"
        elif result.check in (Kind.JACOBIAN, Kind.CUSTOM_GRADIENT):
            reasons[pair] = ("no Jacobian block was kept (the check ran without"
                             " keep_blocks, or tape.jacobian failed)")
    return [f"{input_name} -> {output}: no picture, {why}"
            for (output, input_name), why in reasons.items()]
