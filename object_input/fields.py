"""Names of every field in an object_input feature dict, and the per-box field registry.

Every module refers to fields through these constants. Ops that drop, reorder or duplicate boxes
gather *all* registered per-box fields (see :func:`per_box_fields`), so a field registered here,
including a user's own, stays aligned with its box through every op.
"""

from __future__ import annotations

IMAGE = "image"
IMAGE_SHAPE = "image_shape"  # int32 [2]: true (height, width) of the content, before padding
SOURCE_ID = "source_id"
FILENAME = "filename"
KEY = "key"
BOXES = "boxes"  # float32 [N, 4] normalized [ymin, xmin, ymax, xmax]
CLASSES = "classes"  # int32 [N], 1-based
WEIGHTS = "weights"  # float32 [N]
NUM_BOXES = "num_boxes"  # int32 scalar, added by batching so that padding is reversible
AREA = "area"  # float32 [N]
IS_CROWD = "is_crowd"  # bool [N]
DIFFICULT = "difficult"  # bool [N]
GROUP_OF = "group_of"  # bool [N]
MASKS = "masks"  # uint8 [N, H, W], 1 = foreground
KEYPOINTS = "keypoints"  # float32 [N, K, 2] normalized (y, x); NaN = unlabeled
KEYPOINT_VISIBILITIES = "keypoint_visibilities"  # bool [N, K]
TRACK_IDS = "track_ids"  # int32 [N]
MULTICLASS_SCORES = "multiclass_scores"  # float32 [N, num_classes]
IMAGE_CLASSES = "image_classes"  # int32 [M]: image-level labels, not per box
# int32 scalar: boxes the example lost after decoding: unknown class names dropped, boxes
# clipped away, boxes that crops and box filters removed, and max_boxes truncation
NUM_DROPPED_BOXES = "num_dropped_boxes"
RECORD_ID = "record_id"  # string scalar "file:index", names the record in errors
# float32 [P]: one image's parameters of its trailing steps' pixel work on the batch: applied in
# the pipeline (trailing_steps="batched"), or by object_input.keras.layers.DeviceAugmentation on the
# training device (trailing_steps="device")
DEVICE_PARAMETERS = "device_parameters"
# int32 scalar: 0 for a good record, else the reason code of its first failed check (see
# object_input.reliability.errors); the pipeline raises it or drops and counts the record before
# batching
ERROR = "error"
ERROR_DETAIL = "error_detail"  # string scalar: the failed check's message naming record and field
# Classification and other whole-image fields (sources other than detection TFRecords).
LABEL = "label"  # int32 scalar: the image's class (CIFAR-100: the fine label)
COARSE_LABEL = "coarse_label"  # int32 scalar: CIFAR-100's coarse (superclass) label
FLOAT_DATA = "float_data"  # float32 [D]: Caffe Datum float_data
# string scalar "RGB" or "BGR": the image's channel order, from a source that can give either
# (CaffeLMDB); steps that depend on the order (caffe_transform) read it here
CHANNEL_ORDER = "channel_order"
# Earth Engine image exports: the patch's place in the export.
PATCH_INDEX = "patch_index"  # int64 scalar: position in export order
PATCH_ROW = "patch_row"  # int64 scalar: row of the patch grid
PATCH_COL = "patch_col"  # int64 scalar: column of the patch grid
PATCH_BOUNDS = "patch_bounds"  # float64 [4]: (xmin, ymin, xmax, ymax) of the unbuffered patch
# The place of an example in its iteration, carried up to the batch and read there to track where
# an iterator is (object_input.place); the pipeline strips them before its output.
POSITION = "_position"  # int64 scalar: the record's position in the iteration's stream
# int64 scalar: where a restored iterator would read again from, once this example is batched
RESTART = "_restart"
START = "_start"  # int64 scalar: where this example's partner group begins in the stream
REPLAYED = "_replayed"  # bool scalar: read again after a restore, delivered before it: dropped
# Deferred decoding: while these two are present, IMAGE is a zero-channel placeholder of the true
# size and the pixels are decoded later, only inside the window the geometric ops chose.
ENCODED_IMAGE = "encoded_image"  # string scalar: the undecoded image bytes
# int32 [6]: window top, left in the source image; flipped up-down, left-right; source height, width
IMAGE_VIEW = "image_view"

_BUILTIN_PER_BOX = (
    BOXES,
    CLASSES,
    WEIGHTS,
    AREA,
    IS_CROWD,
    DIFFICULT,
    GROUP_OF,
    MASKS,
    KEYPOINTS,
    KEYPOINT_VISIBILITIES,
    TRACK_IDS,
    MULTICLASS_SCORES,
)

_per_box: list[str] = list(_BUILTIN_PER_BOX)


def register_per_box_field(name: str) -> None:
    """Declare ``name`` as per-box: its leading dimension is the number of boxes."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a per-box field name must be a non-empty string, got {name!r}")
    if name not in _per_box:
        _per_box.append(name)


def unregister_per_box_field(name: str) -> None:
    """Remove a user-registered per-box field. Built-in fields cannot be removed."""
    if name in _BUILTIN_PER_BOX:
        raise ValueError(f"{name!r} is a built-in per-box field and cannot be unregistered")
    if name in _per_box:
        _per_box.remove(name)


def per_box_fields() -> tuple[str, ...]:
    """All registered per-box field names, built-in first."""
    return tuple(_per_box)


def is_per_box(name: str) -> bool:
    """Whether ``name`` is a registered per-box field."""
    return name in _per_box


def shape_key(name: str) -> str:
    """Name of the side field that records ``name``'s true shape before batch padding."""
    return f"{name}_shape"
