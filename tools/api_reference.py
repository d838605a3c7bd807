"""Build the API reference page from the docstrings, with pdoc (in the test extra).

    python tools/api_reference.py [OUTPUT_DIR]     # default: build/api; open gradcheck.html

One page: gradcheck.check, gradcheck.assert_gradients, gradcheck.Watch and what they return
(Report, CheckResult), with their signatures and docstrings; tests/test_api_reference.py builds
it in CI (offline).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build(output: Path) -> Path:
    """Write the page (gradcheck.html, with pdoc's index.html and search.js) into `output`."""
    import pdoc

    import gradcheck

    for name in gradcheck.__all__:  # the public names are imported on first use: load them
        getattr(gradcheck, name)
    pdoc.render.configure(docformat="markdown", footer_text=f"gradcheck {gradcheck.__version__}",
                          show_source=False)
    pdoc.pdoc("gradcheck", r"!gradcheck\.", output_directory=output)  # the package's page only
    return output / "gradcheck.html"


if __name__ == "__main__":
    print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "build" / "api"))
