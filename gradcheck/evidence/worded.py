"""Transitional: a finding whose check still writes its own message (not yet converted to
typed evidence), wrapped so that the diagnosis can attribute it (diagnosis/explained.py) and
so that checks/second_order.py can re-word a converted result. Remove once every check
builds evidence."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence, internal


@dataclasses.dataclass(frozen=True)
class Worded(Evidence):
    """The message an unconverted check wrote; its JSON `details` stay the result's own."""

    text: str = internal("")
