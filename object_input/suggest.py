"""Suggestions for misspelled names, shared by every place that rejects an unknown name."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, known: Iterable[str], *, cutoff: float = 0.6, limit: int = 3) -> str:
    """``"; did you mean 'a', 'b'?"`` with the closest of ``known``, or ``""`` if none is close."""
    close = difflib.get_close_matches(str(name), list(known), n=limit, cutoff=cutoff)
    return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
