"""`python -m gradcheck`."""

import os
import sys

# `python -m` puts the current folder first on sys.path: a json.py there would shadow the
# standard library's json for gradcheck's own imports. It stays on the path, last.
if sys.path and sys.path[0] in ("", os.getcwd()):
    sys.path.append(sys.path.pop(0))

from gradcheck.cli import main  # noqa: E402

main()
