"""A report in a real Jupyter kernel (nbclient): an HTML table, the text table for print(),
pictures inline, and no warnings of gradcheck's own in the cell."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

CELLS = (
    "import tensorflow as tf\nimport gradcheck\n"
    "report = gradcheck.check('custom_gradient_mistakes.py:transposed', keep_blocks=True)\n"
    "report",
    "print(report)",
    "report.plot()",
    "gradcheck.check('custom_gradient_correct.py:f')",
    # Keras targets retrace gradcheck's compiled VJP: TensorFlow would warn about it
    "for target in ('keras_models.py:numpy_model', 'keras_training_loss.py:loss'):\n"
    "    gradcheck.check(target)",
    # ... but the user's own retracing is still reported
    "g = tf.function(lambda x: 2.0 * x)\n"
    "for n in range(1, 7):\n"
    "    g(tf.ones(n))",
)


def _outputs(cell: Any, kind: str) -> list[Any]:
    return [output for output in cell.outputs if output.output_type == kind]


@pytest.fixture(scope="module")
def executed() -> Any:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    root = str(Path(__file__).resolve().parent.parent)
    env_path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    os.environ["PYTHONPATH"] = env_path  # the kernel imports this tree's gradcheck
    client = nbclient.NotebookClient(
        notebook, timeout=240, kernel_name="python3",
        resources={"metadata": {"path": str(FIXTURES)}})
    return client.execute()


def test_a_report_displays_as_an_html_table_with_the_failures_highlighted(executed: Any) -> None:
    result = _outputs(executed.cells[0], "execute_result")[0]
    html = result.data["text/html"]
    assert html.startswith('<div class="gradcheck-report">') and "<table" in html
    assert "custom-gradient" in html and "FAIL" in html and "#fde2e1" in html  # failing rows
    assert "custom_gradient_mistakes.py:13" in html
    assert "finite differences" in html  # the small block as matrices
    assert "CheckResult(" not in result.data["text/plain"]


def test_print_shows_the_text_table(executed: Any) -> None:
    printed = "".join(o.text for o in _outputs(executed.cells[1], "stream")
                      if o.name == "stdout")
    assert "FAILED custom_gradient_mistakes.py:transposed: 4 failed" in printed
    assert "┃status" in printed and "CheckResult(" not in printed


def test_plot_shows_the_pictures_inline(executed: Any) -> None:
    html = _outputs(executed.cells[2], "execute_result")[0].data["text/html"]
    assert html.count("<img") == 1 and "data:image/png;base64," in html


def _streams(cell: Any) -> str:
    # TensorFlow's logger writes to stdout in a kernel, warnings.warn to stderr.
    return "".join(o.text for o in _outputs(cell, "stream"))


def test_no_warnings_of_gradcheck_in_the_cells(executed: Any) -> None:
    for index, cell in enumerate(executed.cells[:-1]):
        if index != 1:  # the print
            assert _streams(cell) == "", cell.source
    assert "WARNING" not in _streams(executed.cells[1])
    assert "triggered tf.function retracing" in _streams(executed.cells[-1])
    passing = _outputs(executed.cells[3], "execute_result")[0].data["text/html"]
    assert "OK</b>" in passing
