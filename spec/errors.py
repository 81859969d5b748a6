"""Errors raised while reading a task.

SpecError
 └── (message names the field path and what is allowed)

A SpecError is always the user's to fix, so the CLI prints it as one line and exits 2.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["REDACTED", "SpecError", "did_you_mean", "redacted"]

REDACTED = "<redacted>"
"""What a secret's value shows as, wherever skyhop displays a task."""
_SHORTEST_REDACTED = 3
"""Shorter values are left alone: redacting "1" would mangle every number in the text."""


class SpecError(ValueError):
    """A task, resources or CLI override is invalid.

    Attributes:
        field: dotted path of the offending field (``resources.cpus``), or "" for the document.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return " (did you mean 'x'?)" for the closest choice, or "" if none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def redacted(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret value in it replaced by ``REDACTED`` (longest first)."""
    for value in sorted((v for v in secrets if v and len(v) >= _SHORTEST_REDACTED), key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text
