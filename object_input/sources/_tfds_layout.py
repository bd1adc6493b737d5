"""How :class:`~object_input.sources.TFDS` maps a dataset's features to fields: its feature
leaves (:class:`Feature`), the mapping by TFDS's conventions and the shared names
(:data:`object_input.sources._hub_layout.NAMES`), and a ``fields=`` mapping to suggest.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.sources import _hub_layout as hub_layout
from object_input.sources._hub_layout import NAMES, LayoutError

# Top-level features naming the image, by full path, in order of preference.
SOURCE_ID_PATHS = ("image/id", "image_id", "id")
FILENAME_PATHS = ("image/filename", "image/file_name", "file_name", "filename")
# Per-object features with a field of ours, by key (coco: is_crowd, area; voc: is_difficult;
# open_images_v4: is_group_of).
PER_OBJECT_KEYS = {name: field for field in hub_layout.PER_OBJECT for name in NAMES[field]}


@dataclasses.dataclass(frozen=True)
class Feature:
    """One leaf of a TFDS feature dict.

    Attributes:
      path: its keys joined by "/" (``"objects/bbox"``), as the examples nest them.
      connector: the TFDS feature connector (``Image``, ``ClassLabel``, ``BBoxFeature``, ...).
      sequence: the path of the ``Sequence`` it lies in (one value per element), or None.
    """

    path: str
    connector: Any
    sequence: str | None

    @property
    def key(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def kind(self) -> str:
        return type(self.connector).__name__

    @property
    def dtype(self) -> tf.DType | None:
        """Its dtype; None for a nested connector (a ``Dataset`` of examples)."""
        try:
            return tf.as_dtype(self.connector.tf_dtype)
        except TypeError:
            return None

    def describe(self) -> str:
        """``"objects/bbox: BBoxFeature float32 [N, 4], one per element of objects"``."""
        if self.dtype is None:
            return f"{self.path}: {self.kind}"
        dims = ["N"] if self.sequence else []
        dims += ["None" if d is None else str(d) for d in self.connector.shape]
        text = f"{self.path}: {self.kind} {self.dtype.name} [{', '.join(dims)}]"
        names = getattr(self.connector, "names", None) if self.kind == "ClassLabel" else None
        if names:
            text += f" ({len(names)} classes)"
        return text + (f", one per element of {self.sequence}" if self.sequence else "")


def feature_leaves(tfds: Any, connector: Any, path: str = "", sequence: str | None = None):
    """Every leaf of ``connector`` (a ``FeaturesDict``) as :class:`Feature`, in its order."""
    # Exact types, as TFDS's own traversal: subclasses (Dataset, Translation) are leaves.
    if type(connector) is tfds.features.FeaturesDict:
        return [
            leaf
            for key, inner in connector.items()
            for leaf in feature_leaves(tfds, inner, f"{path}/{key}" if path else key, sequence)
        ]
    if type(connector) is tfds.features.Sequence:
        return feature_leaves(tfds, connector.feature, path, sequence or path)
    return [Feature(path, connector, sequence)]


def _pick(candidates: list[Feature], preferred: tuple[str, ...], what: str) -> Feature | None:
    """The one candidate, or the first whose key comes first in ``preferred``; None if there
    are none; LayoutError if several remain."""
    for key in preferred:
        for leaf in candidates:
            if leaf.key == key:
                return leaf
    if len(candidates) > 1:
        raise LayoutError(f"several {what}: {', '.join(leaf.path for leaf in candidates)}")
    return candidates[0] if candidates else None


def automatic_fields(leaves: list[Feature]) -> dict[str, str]:
    """``{field: feature path}`` by the conventions of TFDS's image datasets (see
    :class:`TFDS`); LayoutError saying what is ambiguous or missing."""
    top = [leaf for leaf in leaves if leaf.sequence is None]
    mapping: dict[str, str] = {}
    image = _pick([f for f in top if f.kind == "Image"], NAMES[fields.IMAGE], "top-level images")
    if image is None:
        raise LayoutError("no top-level Image feature")
    mapping[fields.IMAGE] = image.path
    in_sequences = [f for f in leaves if f.sequence is not None and f.kind == "BBoxFeature"]
    boxes = _pick(in_sequences, NAMES[fields.BOXES], "box features in sequences")
    if boxes is not None:
        mapping[fields.BOXES] = boxes.path
        objects = [f for f in leaves if f.sequence == boxes.sequence]
        labels = [f for f in objects if f.kind == "ClassLabel"]
        classes = _pick(labels, NAMES[fields.CLASSES], f"class labels in {boxes.sequence}")
        if classes is not None:
            mapping[fields.CLASSES] = classes.path
        for leaf in objects:
            field = PER_OBJECT_KEYS.get(leaf.key)
            if field is not None:
                mapping.setdefault(field, leaf.path)
    labels = [f for f in top if f.kind == "ClassLabel"]
    coarse = [f for f in labels if f.key in NAMES[fields.COARSE_LABEL]]
    if coarse:
        mapping[fields.COARSE_LABEL] = coarse[0].path
    label = _pick(
        [f for f in labels if f not in coarse], NAMES[fields.LABEL], "image-level class labels"
    )
    if label is not None:
        mapping[fields.LABEL] = label.path
    for leaf in leaves:
        # voc's "labels": the image's classes, a sequence of ClassLabels of its own.
        if leaf.path == "labels" and leaf.sequence == "labels" and leaf.kind == "ClassLabel":
            mapping[fields.IMAGE_CLASSES] = leaf.path
    paths = {leaf.path for leaf in top}
    filename = next((p for p in FILENAME_PATHS if p in paths), None)
    if filename is not None:
        mapping[fields.FILENAME] = filename
    source_id = next((p for p in SOURCE_ID_PATHS if p in paths), filename)
    if source_id is not None:
        mapping[fields.SOURCE_ID] = source_id
    return mapping


def suggested_fields(leaves: list[Feature]) -> dict[str, str]:
    """A ``fields=`` mapping to start from: the first image, box feature and class label of
    its sequence, or without boxes the first image-level class label."""

    def paths(kind: str, sequence: str | None) -> list[str]:
        return [f.path for f in leaves if f.kind == kind and f.sequence == sequence]

    boxes = next((f for f in leaves if f.kind == "BBoxFeature"), None)
    candidates = {fields.IMAGE: paths("Image", None)}
    if boxes is not None:
        candidates[fields.BOXES] = [boxes.path]
        candidates[fields.CLASSES] = paths("ClassLabel", boxes.sequence)
    else:
        candidates[fields.LABEL] = paths("ClassLabel", None)
    return hub_layout.suggestion({}, candidates)
