"""Renderers, tested on hand-built reports (no TensorFlow)."""

from __future__ import annotations

import json

from gradcheck.evidence import Location
from gradcheck.evidence.notes import DtypeFallback, ModeAsked
from gradcheck.render.json_format import check_dict, render_error_json, render_json
from gradcheck.render.text import render_text
from gradcheck.report import CheckResult, Report, TensorInfo


def hand_built() -> Report:
    return Report(
        target="fixtures/seed_custom_gradient.py:f",
        inputs=(TensorInfo("x", (2,), "float64"),),
        outputs=(TensorInfo("y", (2,), "float64"),),
        checks=(
            CheckResult("vjp", "pass", "matches", input="x", output="y", max_abs_err=1e-12,
                        max_rel_err=2e-12, worst_index=(1,)),
            CheckResult("grad-shape", "fail", "grad_fn of f returned shape (2, 2)", input="x",
                        output=None, location=Location("fixtures/seed_custom_gradient.py", 9)),
            CheckResult("upstream", "warn", "all ones", output="y", max_abs_err=float("nan")),
        ),
        notes=("float inputs promoted to float64",),
    )


def test_json_has_the_contract_fields() -> None:
    data = json.loads(render_json(hand_built()))
    assert data["gradcheck"] == "0.1.0" and data["ok"] is False and data["exit_code"] == 1
    failing = data["checks"][1]
    assert failing == {
        "check": "grad-shape", "status": "fail", "input": "x", "output": None,
        "message": "grad_fn of f returned shape (2, 2)",
        "location": "fixtures/seed_custom_gradient.py:9",
        "max_abs_err": None, "max_rel_err": None, "worst_index": None, "excess": None,
        "cause": None,
        "details": {},
    }
    assert data["checks"][0]["worst_index"] == [1]
    assert data["checks"][2]["max_abs_err"] is None  # NaN never reaches JSON


def test_typed_notes_are_published_and_shown_as_their_sentences() -> None:
    note = DtypeFallback("f", "float64", "TypeError: no float64", "float32")
    report = Report("m.py:f", (), (), (CheckResult("jacobian", "pass", "fine"),),
                    notes=(note, "a hand-built note"))
    said = ("f does not accept float64 inputs (TypeError: no float64); checked in float32, the"
            " arguments' own dtype, with float32 tolerances")
    assert json.loads(render_json(report))["notes"] == [said, "a hand-built note"]
    assert f"note: {said}" in " ".join(render_text(report).split())
    # A note among a finding's details is published as its sentence too.
    fast = CheckResult("fast", "pass", "fine",
                       details={"mode_reason": ModeAsked("fast"), "probes": 8})
    assert check_dict(fast)["details"] == {"mode_reason": "--mode fast was asked for",
                                           "probes": 8}


def test_error_json() -> None:
    assert json.loads(render_error_json("file 'x.py' not found", 2, "x.py:f")) == {
        "gradcheck": "0.1.0", "target": "x.py:f", "ok": False, "exit_code": 2,
        "error": "file 'x.py' not found"}


def test_table_sorts_worst_first_and_summarises() -> None:
    text = render_text(hand_built())
    lines = text.splitlines()
    fail_line = next(i for i, line in enumerate(lines) if "FAIL" in line)
    pass_line = next(i for i, line in enumerate(lines) if "PASS" in line)
    assert fail_line < pass_line
    assert "fixtures/seed_custom_gradient.py:9" in text
    assert "note: float inputs promoted to float64" in text
    assert lines[-1] == ("FAILED fixtures/seed_custom_gradient.py:f: 1 failed, 1 warnings,"
                         " 1 passed")


def test_ok_report_summary() -> None:
    report = Report("t:f", (), (), (CheckResult("jacobian", "pass", "ok"),))
    assert report.ok and render_text(report).splitlines()[-1] == "OK t:f: 1 passed"


def test_a_block_of_a_rank_2_output_is_shown_one_row_per_output_element() -> None:
    from gradcheck.kinds.jacobian.evidence import JacobianMatch

    block = [[[1.0, 0, 0, 0], [0, 2.0, 0, 0]], [[0, 0, 3.0, 0], [0, 0, 0, 4.0]]]
    report = Report(
        target="t:f", inputs=(TensorInfo("x", (4,), "float64"),),
        outputs=(TensorInfo("y", (2, 2), "float64"),),
        checks=(CheckResult("jacobian", "pass", input="x", output="y", max_abs_err=0.0,
                            max_rel_err=0.0, excess=0.0, evidence=JacobianMatch(
            autodiff=block, finite_difference=block, shape=[2, 2, 4], fd_error_estimate=0.0,
            atol=1e-8, rtol=1e-6)),))
    text = render_text(report, show_matrices=True)
    rows = [line.split() for line in text.splitlines() if line.strip()[:1].isdigit()]
    assert rows == [[f"{v:g}" for v in r[:4]] * 2 for r in
                    [[1, 0, 0, 0], [0, 2, 0, 0], [0, 0, 3, 0], [0, 0, 0, 4]]]


def _with_a_long_skip() -> Report:
    reason = ("no reverse-mode VJP for x to compare with (see the checks above); forward mode"
              " needs the gradient that failed")
    return Report("fixtures/seed_custom_gradient.py:f", (), (), hand_built().checks + (
        CheckResult("jvp", "skip", reason, input="x", output="y"),))


def test_a_skips_reason_is_told_below_the_table_when_the_table_cannot_show_it() -> None:
    reason = " ".join(_with_a_long_skip().checks[-1].message.split())
    for width in (80, 100, 200):
        text = render_text(_with_a_long_skip(), width=width)
        assert max(len(line) for line in text.splitlines()) <= width
        assert reason in " ".join(text.split()), (width, text)
        assert text == "".join(line.rstrip() + "\n" for line in text.splitlines())
    # Wide enough for the whole reason in the message column: not repeated below.
    short = Report("m.py:f", (), (), (CheckResult("jvp", "skip", "no VJP", input="x"),))
    assert "1. SKIP" not in render_text(short, width=200)
    assert "1. SKIP jvp (x)" in render_text(short, width=40)


def test_the_run_summary_keeps_names_and_times_and_tells_findings_below_when_narrow() -> None:
    from gradcheck.errors import ExitCode
    from gradcheck.render.summary import render_run_text
    from gradcheck.report import CheckOutcome, RunResult

    result = RunResult((
        CheckOutcome("a-check-with-a-rather-long-name", "m.py:f", hand_built(),
                     ExitCode.CHECK_FAILED, seconds=12.5),
        CheckOutcome("missing-function", "ops:nothing", None, ExitCode.USAGE_ERROR, seconds=0.0,
                     error="attribute 'nothing' not found in module 'ops'"),
    ))
    for width in (80, 100, 200):
        text = render_run_text(result, width=width)
        lines = text.splitlines()
        rows = [line for line in lines if line.startswith("│")]
        assert max(len(line) for line in lines) <= width
        assert all(line.endswith("│") for line in rows), text
        assert any("a-check-with-a-rather-long-name" in line and "12.5s" in line
                   for line in rows), text
        assert "attribute 'nothing' not found in module 'ops'" in " ".join(text.split())
        assert "…" not in text


def test_a_library_s_long_location_leaves_the_numbers_and_messages_in_the_table() -> None:
    """A PASS row at a file under site-packages (TFP's own custom gradient) once took the
    location column so wide at 160 columns that the numbers and messages left the table."""
    library = Location("/work/.venv/lib/python3.11/site-packages/tensorflow_probability/python/"
                       "internal/custom_gradient.py", 84)
    report = Report("m.py:f", (), (), (
        CheckResult("non-finite", "fail", "y is NaN", output="y",
                    location=Location("m.py", 10)),
        CheckResult("custom-gradient", "pass", "f_wrapped matches", location=library),
        CheckResult("compiled", "pass", "the VJP matches", input="x", max_abs_err=0.0,
                    max_rel_err=0.0)))
    table = render_text(report, width=160).split("\n┗")[0].split("└")[0]
    header = table.splitlines()[1]
    assert "message" in header and "max abs" in header, table
    assert "custom_gradient.py:84" in table and "site-packages" not in table
    assert "m.py:10" in table
