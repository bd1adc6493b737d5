"""Suggestions for misspelled names, shared by every place that rejects an unknown name."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

from object_input import wording

#: Label map names listed in full after an unknown one; a longer map is cut with "...".
NAMES_LISTED = 10


def did_you_mean(name: str, known: Iterable[str], *, cutoff: float = 0.6, limit: int = 3) -> str:
    """``"; did you mean 'a', 'b'?"`` with the closest of ``known``, or ``""`` if none is close."""
    close = difflib.get_close_matches(str(name), list(known), n=limit, cutoff=cutoff)
    return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def unknown_names_message(
    names: Any, known: Sequence[str], *, cutoff: float = 0.6, limit: int = 3
) -> Any:
    """A string scalar tensor naming each of ``names`` (a string tensor, duplicates shown once)
    with the closest of ``known`` (``"dgo" (did you mean "dog"?), "xyz"``), then ``known``
    itself (``; the label map has 2 names: "cat", "dog"``).

    The graph twin of :func:`did_you_mean`, for messages built inside a pipeline: closeness is
    ``1 - edit distance / (len(a) + len(b))``, about difflib's ratio, at least ``cutoff``.
    """
    import tensorflow as tf

    known = list(known)
    if not known:
        raise ValueError("unknown_names_message needs the known names")
    listed = ", ".join(f'"{k}"' for k in known[:NAMES_LISTED])
    more = ", ..." if len(known) > NAMES_LISTED else ""
    tail = f"; the label map has {wording.count(len(known), 'name')}: {listed}{more}"
    unique = tf.unique(tf.reshape(names, [-1])).y
    # Quoted as UTF-8 (bad bytes as U+FFFD): Python could not show the message else.
    unique = tf.strings.unicode_transcode(unique, "UTF-8", "UTF-8", errors="replace")
    # Messages are built for every check of a failed record: there may be no name at all.
    shown = tf.cond(
        tf.size(unique) > 0,
        lambda: _suggestions(unique, tf.constant(known), cutoff, limit),
        lambda: tf.constant(""),
    )
    return tf.strings.join([shown, tail])


def _suggestions(unique: Any, table: Any, cutoff: float, limit: int) -> Any:
    """``"a" (did you mean "b"?), "c"`` for the (one or more) names ``unique``."""
    import tensorflow as tf

    rows, count = tf.size(unique), tf.size(table)
    # Every (unknown, known) pair, one row each, characters as sparse sequences.
    left = tf.gather(_characters(unique), tf.repeat(tf.range(rows), count))
    right = tf.gather(_characters(table), tf.tile(tf.range(count), [rows]))
    distance = tf.edit_distance(left.to_sparse(), right.to_sparse(), normalize=False)
    total = tf.cast(left.row_lengths() + right.row_lengths(), tf.float32)
    closeness = tf.reshape(1.0 - distance / tf.maximum(total, 1.0), [rows, count])
    order = tf.argsort(closeness, axis=1, direction="DESCENDING", stable=True)[:, :limit]
    near = tf.ragged.boolean_mask(
        tf.gather(table, order), tf.gather(closeness, order, batch_dims=1) >= cutoff
    )
    suggested = tf.strings.reduce_join(tf.strings.join(['"', near, '"']), axis=1, separator=", ")
    shown = tf.where(
        near.row_lengths() > 0,
        tf.strings.join(['"', unique, '" (did you mean ', suggested, "?)"]),
        tf.strings.join(['"', unique, '"']),
    )
    return tf.strings.reduce_join(shown, separator=", ")


def _characters(strings: Any) -> Any:
    import tensorflow as tf

    return tf.strings.unicode_split(strings, "UTF-8")
