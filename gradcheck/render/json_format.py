"""The JSON report of the contract."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from gradcheck.evidence import Location, public_fields, public_items
from gradcheck.evidence.explain import (
    Explanation,
    InputExplanation,
    Misconception,
    TargetExplanation,
    TensorView,
)
from gradcheck.evidence.notes import Note
from gradcheck.render.explanation_words import (
    FORMULAS,
    coincide_text,
    misconception_text,
    several_text,
)
from gradcheck.report import VERSION, Cause, CheckResult, Report, TensorInfo


def _clean(value: Any) -> Any:
    if isinstance(value, Location):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _clean(public_items(value))
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "tolist"):
        return _clean(value.tolist())
    return value


def tensor_dict(info: TensorInfo) -> dict[str, Any]:
    return {"name": info.name, "shape": list(info.shape), "dtype": info.dtype,
            "differentiable": info.differentiable, "kind": info.kind}


def _details(result: CheckResult) -> dict[str, Any]:
    """The evidence's public fields; a hand-built finding without evidence publishes the
    details it was given."""
    evidence = result.evidence
    published = public_fields(evidence) if evidence is not None else {}
    return {name: value.words() if isinstance(value, Note) else value
            for name, value in (published or result.details).items()}


def cause_dict(cause: Cause | None) -> dict[str, Any] | None:
    """The JSON report's `cause` object."""
    if cause is None:
        return None
    return {"mistake": cause.mistake, "what": cause.what, "culprit": cause.culprit,
            "location": cause.location, "fix": cause.fix}


def check_dict(result: CheckResult) -> dict[str, Any]:
    return {
        "check": result.check,
        "status": result.status,
        "input": result.input,
        "output": result.output,
        "message": result.message,
        "location": result.location,
        "max_abs_err": result.max_abs_err,
        "max_rel_err": result.max_rel_err,
        "worst_index": list(result.worst_index) if result.worst_index is not None else None,
        "excess": result.excess,
        "cause": cause_dict(result.cause),
        "details": _details(result),
    }


def report_dict(report: Report) -> dict[str, Any]:
    data: dict[str, Any] = {
        "gradcheck": VERSION,
        "target": report.target,
        "ok": report.ok,
        "exit_code": int(report.exit_code),
        "inputs": [tensor_dict(i) for i in report.inputs],
        "outputs": [tensor_dict(o) for o in report.outputs],
        "checks": [check_dict(c) for c in report.checks],
        "notes": [str(note) for note in report.notes],
    }
    if report.explain is not None:
        data["explain"] = explanation_dict(report.explain)
    return _clean(data)


def _view(view: TensorView | None) -> dict[str, Any] | None:
    if view is None:
        return None
    data: dict[str, Any] = {"shape": list(view.shape), "values": view.values}
    if view.summary is not None:
        data["summary"] = dataclasses.asdict(view.summary)
    return data


def _misconception(wrong: Misconception | None) -> dict[str, Any] | None:
    if wrong is None:
        return None
    return {"compatible": wrong.compatible,
            "shape": None if wrong.shape is None else list(wrong.shape),
            "values": _view(wrong.values), "difference": _view(wrong.difference),
            "max_abs_difference": wrong.max_abs_difference, "message": misconception_text(wrong)}


def _target_dict(entry: InputExplanation, target: TargetExplanation) -> dict[str, Any]:
    return {"output": target.output, "output_shape": list(target.output_shape),
            "jacobian": _view(target.jacobian), "jacobian_source": target.jacobian_source,
            "upstream": _view(target.upstream), "plain": _view(target.plain),
            "vjp": _view(target.vjp), "misconception": _misconception(target.misconception),
            "diagonal": target.diagonal, "coincide": coincide_text(entry, target),
            "error": target.error}


def _input_dict(entry: InputExplanation) -> dict[str, Any]:
    return {"input": entry.input, "shape": list(entry.shape),
            "targets": [_target_dict(entry, target) for target in entry.targets],
            "several_targets": entry.several_targets, "plain": _view(entry.plain),
            "vjp": _view(entry.vjp), "finite_difference": _view(entry.finite_difference),
            "finite_difference_symmetrised": entry.finite_difference_symmetrised,
            "max_abs_err": entry.max_abs_err, "error": entry.error, "note": several_text(entry),
            "sum_of_contributions": _view(entry.sum_of_contributions),
            "misconception": _misconception(entry.misconception)}


def explanation_dict(explanation: Explanation) -> dict[str, Any]:
    """The JSON report's `explain` object, field by field."""
    return {"formulas": dict(FORMULAS),
            "inputs": [_input_dict(entry) for entry in explanation.inputs]}


def render_json(report: Report) -> str:
    return json.dumps(report_dict(report), indent=2, allow_nan=False)


def error_dict(message: str, exit_code: int, target: str | None = None,
               phase: str | None = None) -> dict[str, Any]:
    """The object printed instead of a report; a crash or time-out also names its phase."""
    data: dict[str, Any] = {"gradcheck": VERSION, "target": target, "ok": False,
                            "exit_code": exit_code, "error": message}
    if phase is not None:
        data["phase"] = phase
    return data


def render_error_json(message: str, exit_code: int, target: str | None = None,
                      phase: str | None = None) -> str:
    return json.dumps(error_dict(message, exit_code, target, phase), indent=2)


def render_run_json(reports: list[dict[str, Any]], exit_code: int) -> str:
    return json.dumps({"gradcheck": VERSION, "ok": exit_code == 0, "exit_code": exit_code,
                       "reports": reports}, indent=2, allow_nan=False)


__all__ = ["check_dict", "error_dict", "render_error_json", "render_json", "render_run_json",
           "report_dict"]
