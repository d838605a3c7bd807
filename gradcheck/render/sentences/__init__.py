"""Every sentence a finding says, made from its evidence (gradcheck.evidence) and attribution.

`sentence` (the whole finding) and `clause` (its headline, by default the whole sentence) are
dispatched on the evidence's type; each family of findings not yet converted registers its
sentences in a module of this package, imported below; the others say themselves (their
`words` method).
"""

from __future__ import annotations

# Each family registers its sentences when imported (one line each, sorted).
import gradcheck.render.sentences.gradients  # noqa: E402,F401
from gradcheck.render.sentences.dispatch import (  # noqa: F401 - the package's interface
    attribution,
    clause,
    first_clause,
    headline,
    message,
    sentence,
)
