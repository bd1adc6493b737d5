"""Counts in messages for people: "1 box", "2 boxes"."""

from __future__ import annotations

# Nouns whose plural is not the singular plus "s".
_PLURALS = {"box": "boxes", "class": "classes", "batch": "batches"}


def count(number: int, noun: str) -> str:
    """``"1 box"``, ``"0 boxes"``, ``"3 bad records"``: ``number`` and ``noun`` (its last word
    inflected) in agreement."""
    if number == 1:
        return f"{number} {noun}"
    head, _, last = noun.rpartition(" ")
    return f"{number} {head}{' ' if head else ''}{_PLURALS.get(last, last + 's')}"
