"""Build ``image/object/*`` Examples from numpy arrays and write them to sharded TFRecords."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

IMAGE_FORMATS = ("jpeg", "png", "raw")
COMPRESSIONS = (None, "", "GZIP")


def _bytes(values: Iterable[bytes]) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=list(values)))


def _floats(values: Any) -> tf.train.Feature:
    flat = np.asarray(values, np.float32).reshape(-1)
    return tf.train.Feature(float_list=tf.train.FloatList(value=flat.tolist()))


def _ints(values: Any) -> tf.train.Feature:
    flat = np.asarray(values, np.int64).reshape(-1)
    return tf.train.Feature(int64_list=tf.train.Int64List(value=flat.tolist()))


def encode_image(image: np.ndarray, image_format: str = "png", quality: int = 95) -> bytes:
    """Encode a ``[H, W, C]`` uint8 array as PNG, JPEG or raw bytes."""
    image = np.asarray(image)
    if image.ndim == 2:
        image = image[..., None]
    if image.ndim != 3 or image.dtype != np.uint8:
        raise ValueError(f"image must be uint8 [H, W, C], got {image.dtype} {image.shape}")
    if image_format == "png":
        return tf.io.encode_png(image).numpy()
    if image_format == "jpeg":
        return tf.io.encode_jpeg(image, quality=quality).numpy()
    if image_format == "raw":
        return image.tobytes()
    raise ValueError(f"image_format must be one of {IMAGE_FORMATS}, got {image_format!r}")


def build_example(
    image: np.ndarray | bytes,
    *,
    boxes: Any = (),
    classes: Sequence[int] = (),
    class_texts: Sequence[str] | None = None,
    image_format: str = "png",
    height: int | None = None,
    width: int | None = None,
    filename: str = "",
    source_id: str = "",
    weights: Sequence[float] | None = None,
    area: Sequence[float] | None = None,
    is_crowd: Sequence[int] | None = None,
    difficult: Sequence[int] | None = None,
    truncated: Sequence[int] | None = None,
    views: Sequence[str] | None = None,
    group_of: Sequence[int] | None = None,
    track_ids: Sequence[int] | None = None,
    masks: np.ndarray | None = None,
    mask_format: str = "png",
    keypoints: np.ndarray | None = None,
    keypoint_visibilities: np.ndarray | None = None,
    multiclass_scores: np.ndarray | None = None,
    image_classes: Sequence[int] | None = None,
    image_class_texts: Sequence[str] | None = None,
    jpeg_quality: int = 95,
) -> tf.train.Example:
    """Build one detection Example.

    ``image`` is a uint8 ``[H, W, C]`` array (encoded as ``image_format``) or already-encoded bytes
    (then ``image_format`` names their format and ``height``/``width`` must be given). Boxes are
    normalized ``[ymin, xmin, ymax, xmax]``; masks ``[N, H, W]`` (> 0 is foreground) written as one
    PNG per box or, with ``mask_format="numerical"``, as N·H·W floats; keypoints ``[N, K, 2]``
    normalized (y, x), NaN for unlabeled, with COCO visibilities (0 unlabeled, 1 occluded,
    2 visible). ``truncated`` and ``views`` (Pascal VOC's flag and pose) are written as
    ``image/object/truncated`` and ``image/object/view``, which the decoder reads through
    ``extra_features``.
    """
    if isinstance(image, bytes):
        if height is None or width is None:
            raise ValueError("height and width are required when image is encoded bytes")
        encoded = image
    else:
        array = np.asarray(image)
        height, width = array.shape[:2]
        encoded = encode_image(array, image_format, jpeg_quality)
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    n = len(boxes)
    per_box = {
        "classes": classes,
        "class_texts": class_texts,
        "weights": weights,
        "area": area,
        "is_crowd": is_crowd,
        "difficult": difficult,
        "truncated": truncated,
        "views": views,
        "group_of": group_of,
        "track_ids": track_ids,
    }
    for name, values in per_box.items():
        if values is not None and len(values) != n and not (name == "classes" and class_texts):
            raise ValueError(f"{name} has {len(values)} values for {n} boxes")
    feature = {
        "image/encoded": _bytes([encoded]),
        "image/format": _bytes([image_format.encode()]),
        "image/height": _ints([height]),
        "image/width": _ints([width]),
        "image/filename": _bytes([filename.encode()]),
        "image/source_id": _bytes([source_id.encode()]),
        "image/key/sha256": _bytes([hashlib.sha256(encoded).hexdigest().encode()]),
        "image/object/bbox/ymin": _floats(boxes[:, 0]),
        "image/object/bbox/xmin": _floats(boxes[:, 1]),
        "image/object/bbox/ymax": _floats(boxes[:, 2]),
        "image/object/bbox/xmax": _floats(boxes[:, 3]),
        "image/object/class/label": _ints(classes),
    }
    if class_texts is not None:
        feature["image/object/class/text"] = _bytes(t.encode() for t in class_texts)
    optional_floats = {"image/object/weight": weights, "image/object/area": area}
    optional_ints = {
        "image/object/is_crowd": is_crowd,
        "image/object/difficult": difficult,
        "image/object/truncated": truncated,
        "image/object/group_of": group_of,
        "image/object/track/label": track_ids,
        "image/class/label": image_classes,
    }
    feature.update({k: _floats(v) for k, v in optional_floats.items() if v is not None})
    feature.update({k: _ints(v) for k, v in optional_ints.items() if v is not None})
    if views is not None:
        feature["image/object/view"] = _bytes(v.encode() for v in views)
    if image_class_texts is not None:
        feature["image/class/text"] = _bytes(t.encode() for t in image_class_texts)
    if masks is not None:
        masks = np.asarray(masks)
        if masks.shape != (n, height, width):
            raise ValueError(f"masks must have shape {(n, height, width)}, got {masks.shape}")
        if mask_format == "png":
            binary = (masks > 0).astype(np.uint8)
            feature["image/object/mask"] = _bytes(encode_image(m, "png") for m in binary)
        elif mask_format == "numerical":
            feature["image/object/mask"] = _floats(masks)
        else:
            raise ValueError(f"mask_format must be 'png' or 'numerical', got {mask_format!r}")
    if keypoints is not None:
        keypoints = np.asarray(keypoints, np.float32)
        if keypoints.ndim != 3 or keypoints.shape[0] != n or keypoints.shape[2] != 2:
            raise ValueError(f"keypoints must have shape [{n}, K, 2], got {keypoints.shape}")
        feature["image/object/keypoint/y"] = _floats(keypoints[..., 0])
        feature["image/object/keypoint/x"] = _floats(keypoints[..., 1])
        if keypoint_visibilities is not None:
            feature["image/object/keypoint/visibility"] = _ints(keypoint_visibilities)
    if multiclass_scores is not None:
        feature["image/object/class/multiclass_scores"] = _floats(multiclass_scores)
    return tf.train.Example(features=tf.train.Features(feature=feature))


def shard_paths(prefix: str, num_shards: int, suffix: str = ".tfrecord") -> list[str]:
    """``prefix-00000-of-0000N<suffix>`` names for ``num_shards`` shards."""
    return [f"{prefix}-{i:05d}-of-{num_shards:05d}{suffix}" for i in range(num_shards)]


class ShardedWriter:
    """Write serialized records round-robin to ``num_shards`` TFRecord files.

    Use as a context manager; ``compression="GZIP"`` writes ``.tfrecord.gz`` shards.
    """

    def __init__(
        self, prefix: str | os.PathLike, num_shards: int = 1, compression: str | None = None
    ):
        if num_shards < 1:
            raise ValueError(f"num_shards must be >= 1, got {num_shards}")
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression must be None or 'GZIP', got {compression!r}")
        suffix = ".tfrecord.gz" if compression == "GZIP" else ".tfrecord"
        self.paths = shard_paths(os.fspath(prefix), num_shards, suffix)
        self._options = tf.io.TFRecordOptions(compression_type=compression or "")
        self._writers: list[tf.io.TFRecordWriter] = []
        self.count = 0

    def __enter__(self) -> ShardedWriter:
        parent = os.path.dirname(self.paths[0])
        if parent:
            os.makedirs(parent, exist_ok=True)
        self._writers = [tf.io.TFRecordWriter(p, self._options) for p in self.paths]
        return self

    def write(self, record: tf.train.Example | bytes) -> None:
        """Write one Example (or serialized bytes) to the next shard."""
        if isinstance(record, tf.train.Example):
            record = record.SerializeToString(deterministic=True)
        self._writers[self.count % len(self._writers)].write(record)
        self.count += 1

    def __exit__(self, *exc: object) -> None:
        for writer in self._writers:
            writer.close()


def write_tfrecords(
    records: Iterable[tf.train.Example | bytes],
    prefix: str | os.PathLike,
    num_shards: int = 1,
    compression: str | None = None,
) -> list[str]:
    """Write ``records`` to sharded TFRecord files; returns the shard paths."""
    with ShardedWriter(prefix, num_shards, compression) as writer:
        for record in records:
            writer.write(record)
    return writer.paths
