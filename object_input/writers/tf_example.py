"""Build ``image/object/*`` Examples from numpy arrays and write them to sharded TFRecords.

Which key each value goes to, and as what kind, is :data:`object_input.schema.EXAMPLE`'s.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from object_input import manifest, schema

IMAGE_FORMATS = ("jpeg", "png", "raw")
COMPRESSIONS = (None, "", "GZIP")


def _feature(kind: str, values: Any) -> tf.train.Feature:
    """A feature of ``values`` (texts are UTF-8 encoded; arrays flattened) as ``kind``."""
    if kind == "bytes":
        listed = [v.encode() if isinstance(v, str) else v for v in values]
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=listed))
    dtype = np.float32 if kind == "float" else np.int64
    flat = np.asarray(values, dtype).reshape(-1).tolist()
    if kind == "float":
        return tf.train.Feature(float_list=tf.train.FloatList(value=flat))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=flat))


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


def _mask_values(masks: Any, mask_format: str, shape: tuple[int, int, int]) -> Any:
    """What is written for ``masks`` (``[N, H, W]``, > 0 foreground): a PNG per box, or (for
    ``mask_format="numerical"``) the values themselves; None for None."""
    if masks is None:
        return None
    masks = np.asarray(masks)
    if masks.shape != shape:
        raise ValueError(f"masks must have shape {shape}, got {masks.shape}")
    if mask_format == "png":
        return [encode_image(m, "png") for m in (masks > 0).astype(np.uint8)]
    if mask_format == "numerical":
        return masks
    raise ValueError(f"mask_format must be 'png' or 'numerical', got {mask_format!r}")


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
    values = {
        "encoded": [encoded],
        "image_format": [image_format],
        "height": [height],
        "width": [width],
        "filename": [filename],
        "source_id": [source_id],
        "sha256": [hashlib.sha256(encoded).hexdigest()],
        **dict(zip(schema.BOX_COORDINATES, boxes.T, strict=True)),
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
        "image_classes": image_classes,
        "image_class_texts": image_class_texts,
        "multiclass_scores": multiclass_scores,
    }
    for entry in schema.EXAMPLE:
        given = values.get(entry.value)
        texts_instead = entry.key == schema.CLASS_LABEL and class_texts
        if entry.per_box and given is not None and len(given) != n and not texts_instead:
            raise ValueError(f"{entry.value} has {len(given)} values for {n} boxes")
    values["masks"] = _mask_values(masks, mask_format, (n, height, width))
    if keypoints is not None:
        keypoints = np.asarray(keypoints, np.float32)
        if keypoints.ndim != 3 or keypoints.shape[0] != n or keypoints.shape[2] != 2:
            raise ValueError(f"keypoints must have shape [{n}, K, 2], got {keypoints.shape}")
        values.update(
            keypoint_y=keypoints[..., 0],
            keypoint_x=keypoints[..., 1],
            keypoint_visibilities=keypoint_visibilities,
        )
    feature = {
        entry.key: _feature(schema.kind_of(entry, mask_format), values[entry.value])
        for entry in schema.EXAMPLE
        if values.get(entry.value) is not None
    }
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
        # A verified manifest entry would no longer hold for the rewritten shards.
        manifest.forget(self.paths)
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
