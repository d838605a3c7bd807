"""Text that evidence's words are cut from: a message's first clause."""

from __future__ import annotations

_OPENING, _CLOSING = "([{", ")]}"


def first_clause(message: str) -> str:
    """Up to the first "; " outside brackets: a hand-built message has no evidence to say
    where its headline ends."""
    depth = 0
    for index, character in enumerate(message):
        if character in _OPENING:
            depth += 1
        elif character in _CLOSING:
            depth = max(0, depth - 1)
        elif depth == 0 and message.startswith("; ", index):
            return message[:index]
    return message
