"""The detection ``tf.train.Example`` schema (the Object Detection API's ``image/*`` keys), once.

:data:`EXAMPLE` has a row per key: the kind of its values, the feature-dict field it decodes
into, whether it holds one value per box, which decoder option reads it, the
``build_example`` value written to it, and the default of a scalar key. The decoder's parse
spec, ``writers.build_example`` and ``inspection``'s schema report derive from it.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from object_input import fields

#: The dtype each kind of value parses to.
KINDS = {"bytes": tf.string, "int64": tf.int64, "float": tf.float32}
#: The ``tf.train.Feature`` list that holds each kind.
FEATURE_LISTS = {"bytes": "bytes_list", "int64": "int64_list", "float": "float_list"}
#: The kind of ``image/object/mask`` in each mask format (``ExampleDecoder(masks=...)``).
MASK_KINDS = {"png": "bytes", "numerical": "float"}
#: When the decoder reads a key: always, when its option asks for it (``masks``,
#: ``num_keypoints``, ``multiclass_scores``), or only through ``extra_features``.
READS = ("always", "masks", "num_keypoints", "multiclass_scores", "extra_features")

ENCODED = "image/encoded"
FORMAT = "image/format"
FILENAME = "image/filename"
SOURCE_ID = "image/source_id"
SHA256 = "image/key/sha256"
HEIGHT = "image/height"
WIDTH = "image/width"
BOX_COORDINATES = ("ymin", "xmin", "ymax", "xmax")
BOX_KEYS = tuple(f"image/object/bbox/{c}" for c in BOX_COORDINATES)
CLASS_LABEL = "image/object/class/label"
CLASS_TEXT = "image/object/class/text"
IMAGE_CLASS_LABEL = "image/class/label"
IMAGE_CLASS_TEXT = "image/class/text"
MASK = "image/object/mask"
KEYPOINT_Y = "image/object/keypoint/y"
KEYPOINT_X = "image/object/keypoint/x"
KEYPOINT_VISIBILITY = "image/object/keypoint/visibility"
MULTICLASS_SCORES = "image/object/class/multiclass_scores"


@dataclasses.dataclass(frozen=True)
class Key:
    """One key of the schema.

    Attributes:
      key: the Example's feature key.
      kind: ``"bytes"``, ``"int64"`` or ``"float"`` (masks: see :data:`MASK_KINDS`).
      field: the feature-dict field it decodes into (keys read through ``extra_features`` keep
        their own name); None for what only decoding reads (the image format).
      per_box: one value per box, or none (then its default per box).
      read: when the decoder reads it (see :data:`READS`).
      value: the name ``build_example`` gives the values it writes there (an argument of its,
        or what it derives: ``encoded``, ``sha256``, box columns, mask and keypoint lists).
      default: a scalar key's value when absent; None for a list.
    """

    key: str
    kind: str
    field: str | None
    per_box: bool = False
    read: str = "always"
    value: str | None = None
    default: str | int | None = None


def _per_box(key: str, kind: str, field: str, value: str, read: str = "always") -> Key:
    return Key(key, kind, field, per_box=True, read=read, value=value)


# In the order build_example has always written them (the order of a serialized Example's keys).
EXAMPLE: tuple[Key, ...] = (
    Key(ENCODED, "bytes", fields.IMAGE, value="encoded", default=""),
    Key(FORMAT, "bytes", None, value="image_format", default=""),
    Key(HEIGHT, "int64", fields.IMAGE_SHAPE, value="height", default=0),
    Key(WIDTH, "int64", fields.IMAGE_SHAPE, value="width", default=0),
    Key(FILENAME, "bytes", fields.FILENAME, value="filename", default=""),
    Key(SOURCE_ID, "bytes", fields.SOURCE_ID, value="source_id", default=""),
    Key(SHA256, "bytes", fields.KEY, value="sha256", default=""),
    *(
        Key(key, "float", fields.BOXES, per_box=True, value=coordinate)
        for coordinate, key in zip(BOX_COORDINATES, BOX_KEYS, strict=True)
    ),
    _per_box(CLASS_LABEL, "int64", fields.CLASSES, "classes"),
    _per_box(CLASS_TEXT, "bytes", fields.CLASSES, "class_texts"),
    _per_box("image/object/weight", "float", fields.WEIGHTS, "weights"),
    _per_box("image/object/area", "float", fields.AREA, "area"),
    _per_box("image/object/is_crowd", "int64", fields.IS_CROWD, "is_crowd"),
    _per_box("image/object/difficult", "int64", fields.DIFFICULT, "difficult"),
    _per_box(
        "image/object/truncated", "int64", "image/object/truncated", "truncated", "extra_features"
    ),
    _per_box("image/object/group_of", "int64", fields.GROUP_OF, "group_of"),
    _per_box("image/object/track/label", "int64", fields.TRACK_IDS, "track_ids"),
    Key(IMAGE_CLASS_LABEL, "int64", fields.IMAGE_CLASSES, value="image_classes"),
    _per_box("image/object/view", "bytes", "image/object/view", "views", "extra_features"),
    Key(IMAGE_CLASS_TEXT, "bytes", fields.IMAGE_CLASSES, value="image_class_texts"),
    Key(MASK, "bytes", fields.MASKS, read="masks", value="masks"),
    Key(KEYPOINT_Y, "float", fields.KEYPOINTS, read="num_keypoints", value="keypoint_y"),
    Key(KEYPOINT_X, "float", fields.KEYPOINTS, read="num_keypoints", value="keypoint_x"),
    Key(
        KEYPOINT_VISIBILITY,
        "int64",
        fields.KEYPOINT_VISIBILITIES,
        read="num_keypoints",
        value="keypoint_visibilities",
    ),
    Key(
        MULTICLASS_SCORES,
        "float",
        fields.MULTICLASS_SCORES,
        read="multiclass_scores",
        value="multiclass_scores",
    ),
)
BY_KEY = {entry.key: entry for entry in EXAMPLE}


def kind_of(entry: Key, masks: str | None = None) -> str:
    """The kind of ``entry``'s values; the masks' by their format, ``masks`` (a key of
    :data:`MASK_KINDS`)."""
    return MASK_KINDS[masks] if entry.key == MASK else entry.kind
