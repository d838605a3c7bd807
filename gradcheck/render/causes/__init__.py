"""Every cause's words, made from its facts (gradcheck.evidence.causes): `what` is wrong and
the `fix`, as the JSON report's `cause` object and the messages say them.

`words` is dispatched on the facts' type; each family registers its words in a module of this
package, imported below. Causes without facts are worded by their mistake alone.
"""

from __future__ import annotations

# Each family registers its words when imported (one line each, sorted).
import gradcheck.render.causes.checks  # noqa: E402,F401
import gradcheck.render.causes.custom_gradients  # noqa: E402,F401
import gradcheck.render.causes.gradients  # noqa: E402,F401
import gradcheck.render.causes.paths  # noqa: E402,F401
from gradcheck.render.causes.dispatch import (  # noqa: F401 - the package's interface
    PLAIN,
    WhatAndFix,
    cause_dict,
    fix,
    kink_place,
    stated_cause,
    what,
    words,
)
