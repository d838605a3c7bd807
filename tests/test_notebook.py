"""A report in a real Jupyter kernel (nbclient): an HTML table, the text table for print(),
pictures inline, and no warnings of gradcheck's own in the cell."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from gradcheck.evidence import Location
from gradcheck.evidence.causes import Words
from gradcheck.kinds.jacobian.evidence import Disagreement, JacobianMismatch
from gradcheck.render.html import render_html
from gradcheck.report import (
    Attribution,
    Cause,
    CheckResult,
    Mistake,
    Relation,
    Report,
    TensorInfo,
)
from tests.conftest import FIXTURES


def hand_report() -> Report:
    jacobian = CheckResult(
        "jacobian", "fail", input="x", output="y['mean']", location=Location("ops.py", 9),
        max_abs_err=5.0,
        max_rel_err=1.7, worst_index=(0, 1), excess=2.5e6, evidence=JacobianMismatch(
            [[1.0, -3.0], [2.0, 0.5]], [[1.0, 2.0], [-3.0, 0.5]], [2, 2], 1e-10, 1e-8, 1e-6,
            Disagreement(2, 4, -3.0, 2.0)),
        attributed_to=Attribution(
            Relation.LIKELY_CAUSE, Cause(Mistake.WRONG_VALUES, "<x> & co", facts=Words(""))))
    connected = CheckResult("connected", "pass", "y['mean'] is connected to x", "x", "y['mean']")
    return Report("ops.py:f", (TensorInfo("x", (2,), "float64"),),
                  (TensorInfo("y['mean']", (2,), "float64"),), (connected, jacobian),
                  notes=("checked in float64",))


def test_the_html_table_from_a_hand_built_report() -> None:
    html = render_html(hand_report())
    rows = html.split("<tbody>")[1].split("</tbody>")[0].split("<tr")[1:]
    assert "FAIL" in rows[0] and "PASS" in rows[1]  # worst first
    assert 'style="background:#fde2e1"' in rows[0] and "background" not in rows[1].split(">")[0]
    assert "&lt;x&gt; &amp; co" in html and "<x>" not in html  # escaped, never markup
    assert "y[&#x27;mean&#x27;]" in html and "<code>ops.py:9</code>" in html
    assert "<th" in html and ">worst</th>" in html and ">[0,1]<" in html
    # The block as matrices: the worst element [0, 1] and the other wrong one [1, 0] marked.
    # Next to each other while the cell is wide enough, wrapped below each other when not.
    assert 'style="display:flex;flex-wrap:wrap' in html
    matrices = html.split(">autodiff (tape.jacobian)</div>")[1]
    marked = [cell.split(">")[1].split("<")[0] for cell in matrices.split("<td ")[1:]
              if "background:" in cell.split(">")[0]]
    assert marked == ["-3", "2", "2", "-3"]
    assert "note: checked in float64" in html and "FAILED</b> ops.py:f: 1 failed, 1 passed" in html


nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

# name: source, run in this order in one kernel (the examples folder as its working directory)
CELLS = {
    "check": "import tensorflow as tf\nimport gradcheck\n"
             "report = gradcheck.check('custom_gradient_mistakes.py:transposed',"
             " keep_blocks=True)\nreport",
    "print": "print(report)",
    "plot": "report.plot()",
    "show": "report.show()",
    "passing": "gradcheck.check('custom_gradient_correct.py:f')",
    # Keras targets retrace gradcheck's compiled VJP: TensorFlow would warn about it ...
    "keras": "for target in ('keras_models.py:numpy_model', 'keras_training_loss.py:loss'):\n"
             "    gradcheck.check(target)",
    # ... but the user's own retracing is still reported
    "own-retracing": "g = tf.function(lambda x: 2.0 * x)\nfor n in range(1, 7):\n"
                     "    g(tf.ones(n))",
    # a function defined in a cell is located in the cell, as IPython's tracebacks say it
    "in-a-cell": "def cut(x):\n    copy = tf.Variable(x)\n    return copy * 2.0\n\n"
                 "print(gradcheck.check(cut, tf.constant([1.0, 2.0])))",
}


def _outputs(cell: Any, kind: str) -> list[Any]:
    return [output for output in cell.outputs if output.output_type == kind]


@pytest.fixture(scope="module")
def executed() -> dict[str, Any]:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in CELLS.values()]
    root = str(Path(__file__).resolve().parent.parent)
    with pytest.MonkeyPatch.context() as patch:  # the kernel imports this tree's gradcheck
        patch.setenv("PYTHONPATH", os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH", "")) if p))
        client = nbclient.NotebookClient(notebook, timeout=240, kernel_name="python3",
                                         resources={"metadata": {"path": str(FIXTURES)}})
        client.execute()
    return dict(zip(CELLS, notebook.cells))


def test_a_report_displays_as_an_html_table_with_the_failures_highlighted(
        executed: dict[str, Any]) -> None:
    result = _outputs(executed["check"], "execute_result")[0]
    html = result.data["text/html"]
    assert html.startswith('<div class="gradcheck-report">') and "<table" in html
    assert "custom-gradient" in html and "FAIL" in html and "#fde2e1" in html  # failing rows
    assert "custom_gradient_mistakes.py:13" in html
    assert "finite differences" in html  # the small block as matrices
    assert "CheckResult(" not in result.data["text/plain"]
    passing = _outputs(executed["passing"], "execute_result")[0].data["text/html"]
    assert "OK</b>" in passing and "#fde2e1" not in passing


def test_print_shows_the_text_table(executed: dict[str, Any]) -> None:
    printed = "".join(o.text for o in _outputs(executed["print"], "stream")
                      if o.name == "stdout")
    assert "FAILED custom_gradient_mistakes.py:transposed: 4 failed" in printed
    assert "┃status" in printed and "CheckResult(" not in printed


def test_plot_and_show_display_the_pictures_inline(executed: dict[str, Any]) -> None:
    (picture,) = _outputs(executed["plot"], "display_data")
    assert picture.data["image/png"].startswith("iVBORw0KGgo")  # a PNG, base64
    html = picture.data["text/html"]
    assert html.count("<img") == 1 and "data:image/png;base64," in html
    shown = [o.data["text/html"] for o in _outputs(executed["show"], "display_data")]
    assert len(shown) == 2 and shown[0].startswith('<div class="gradcheck-report">')
    assert shown[1].count("<img") == 1


def test_a_function_in_a_cell_is_located_as_ipython_names_the_cell(
        executed: dict[str, Any]) -> None:
    printed = "".join(o.text for o in _outputs(executed["in-a-cell"], "stream")
                      if o.name == "stdout")
    number = list(CELLS).index("in-a-cell") + 1  # the cells' execution counts
    assert f"Cell In[{number}], line 2" in printed, printed
    assert "ipykernel" not in printed


def _streams(cell: Any) -> str:
    # TensorFlow's logger writes to stdout in a kernel, warnings.warn to stderr.
    return "".join(o.text for o in _outputs(cell, "stream"))


def test_no_warnings_of_gradcheck_in_the_cells(executed: dict[str, Any]) -> None:
    for name, cell in executed.items():
        if name not in ("print", "own-retracing", "in-a-cell"):
            assert _streams(cell) == "", name
    assert "WARNING" not in _streams(executed["print"])
    assert "triggered tf.function retracing" in _streams(executed["own-retracing"])
