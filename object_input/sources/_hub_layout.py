"""What the hub sources (TFDS, Hugging Face) share to map a dataset's features to fields.

Both find the common layouts by themselves: the feature names below, in order of preference,
together with each hub's own types (a TFDS ``BBoxFeature`` or ``ClassLabel``, a ``datasets``
``Image`` column). A layout they cannot map is a :class:`LayoutError` built by
:func:`layout_error`: what is wrong, the dataset's features, and a ``fields=`` mapping to start
from (:func:`suggestion`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from object_input import fields

#: The names a field's feature goes by, in order of preference (the last part of a TFDS
#: feature's path, a column or a key of a column of dicts in ``datasets``).
NAMES = {
    fields.IMAGE: ("image", "img"),
    fields.LABEL: ("label", "labels", "fine_label"),
    fields.COARSE_LABEL: ("coarse_label",),
    fields.BOXES: ("bbox", "bboxes", "box", "boxes"),
    # kitti's box class is its "type".
    fields.CLASSES: ("category", "category_id", "categories", "label", "labels", "class", "type"),
    fields.AREA: ("area",),
    fields.IS_CROWD: ("iscrowd", "is_crowd"),
    fields.DIFFICULT: ("difficult", "is_difficult"),
    fields.GROUP_OF: ("is_group_of",),
}
#: The per-object fields besides boxes and classes, read where their names are found.
PER_OBJECT = (fields.AREA, fields.IS_CROWD, fields.DIFFICULT, fields.GROUP_OF)


class LayoutError(ValueError):
    """A dataset's features that a hub source cannot map to fields on its own."""


def suggestion(found: Mapping[str, str], candidates: Mapping[str, Sequence[str]]) -> dict:
    """A ``fields=`` mapping to start from: ``found`` (what was mapped), then for each key it
    lacks the first of its ``candidates``, if any."""
    out = dict(found)
    for key, options in candidates.items():
        if key not in out and options:
            out[key] = options[0]
    return out


def layout_error(
    subject: str,
    problem: str,
    features: Iterable[str],
    fields_help: str,
    call: str,
    keys: str = "",
) -> LayoutError:
    """The error of a layout that cannot be read: ``subject`` (the source and dataset), the
    ``problem``, the dataset's ``features`` a line each, what ``fields=`` takes
    (``fields_help``), an example ``call`` with a :func:`suggestion`, and the ``keys`` it takes."""
    listing = "\n".join(f"  {feature}" for feature in features)
    message = (
        f"{subject}: {problem}. Its features:\n{listing}\n"
        f"Pass fields={fields_help}, for example\n  {call}"
    )
    return LayoutError(f"{message}\n{keys}" if keys else message)
