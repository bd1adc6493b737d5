"""Build ``image/object/*`` Examples from numpy arrays and write them to sharded TFRecords.

Which key each value goes to, and as what kind, is :data:`object_input.schema.EXAMPLE`'s.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from object_input import schema, wording
from object_input.verification import manifest

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


def other_shards(prefix: str | os.PathLike, paths: Iterable[str]) -> list[str]:
    """The shard files under ``prefix`` (``prefix-NNNNN-of-MMMMM.tfrecord``, or ``.tfrecord.gz``)
    other than ``paths``, sorted: what is left of an earlier dataset with another shard count or
    compression, which ``prefix-*`` would read together with ``paths``."""
    parent, base = os.path.split(os.fspath(prefix))
    if not tf.io.gfile.isdir(parent or "."):
        return []
    shard = re.compile(rf"{re.escape(base)}-\d{{5,}}-of-\d{{5,}}\.tfrecord(\.gz)?")
    found = (
        os.path.join(parent, name)
        for name in tf.io.gfile.listdir(parent or ".")
        if shard.fullmatch(name)
    )
    return sorted(set(found) - set(paths))


def describe_replaced(prefix: str | os.PathLike, replaced: Sequence[str]) -> str:
    """What replacing the dataset under ``prefix`` removed, for people: ``"removed 4 shards of
    the earlier dataset under data/train: data/train-00000-of-00004.tfrecord …
    data/train-00003-of-00004.tfrecord"``."""
    named = replaced[0] if len(replaced) == 1 else f"{replaced[0]} … {replaced[-1]}"
    shards = wording.count(len(replaced), "shard")
    return f"removed {shards} of the earlier dataset under {os.fspath(prefix)}: {named}"


class StagedShards:
    """The shard files of a dataset under ``prefix``, written where no glob of the prefix
    finds them and moved to their paths only when the whole dataset is written.

    Use as a context manager: the shards are written to :attr:`staged`, in a hidden folder
    beside the prefix (``.train.incomplete-<random>/``); leaving the block normally publishes
    them (:meth:`publish`), leaving it with an exception removes them. A failed write thus
    leaves nothing that ``prefix-*`` or the folder's listing reads as the dataset, and the
    dataset that was there before stays as it was.
    """

    def __init__(self, prefix: str | os.PathLike, num_shards: int, compression: str | None = None):
        if num_shards < 1:
            raise ValueError(f"num_shards must be >= 1, got {num_shards}")
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression must be None or 'GZIP', got {compression!r}")
        self.prefix = os.fspath(prefix)
        suffix = ".tfrecord.gz" if compression == "GZIP" else ".tfrecord"
        self.paths = shard_paths(self.prefix, num_shards, suffix)
        parent, base = os.path.split(self.prefix)
        self.folder = os.path.join(parent, f".{base}.incomplete-{uuid.uuid4().hex[:12]}")
        self.staged = [os.path.join(self.folder, os.path.basename(p)) for p in self.paths]
        #: the shards of an earlier dataset under the prefix that :meth:`publish` removed.
        self.replaced: list[str] = []

    def __enter__(self) -> StagedShards:
        tf.io.gfile.makedirs(self.folder)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            self.publish()
        else:
            self.discard()

    def publish(self) -> list[str]:
        """Move the staged shards to :attr:`paths`, replacing files of those names, then remove
        the shards of another count or compression under the prefix (:func:`other_shards`):
        the prefix then holds this dataset alone. Returns the removed paths."""
        try:
            self.replaced = other_shards(self.prefix, self.paths)
            # A verified manifest entry would no longer hold for the replaced files.
            manifest.forget([*self.paths, *self.replaced])
            for staged, path in zip(self.staged, self.paths, strict=True):
                tf.io.gfile.rename(staged, path, overwrite=True)
            for path in self.replaced:
                tf.io.gfile.remove(path)
        finally:
            self.discard()
        return self.replaced

    def discard(self) -> None:
        """Remove the staged shards (and their folder)."""
        if tf.io.gfile.exists(self.folder):
            tf.io.gfile.rmtree(self.folder)


class ShardedWriter(StagedShards):
    """Write serialized records round-robin to ``num_shards`` TFRecord files.

    Use as a context manager; ``compression="GZIP"`` writes ``.tfrecord.gz`` shards. The shards
    get their names ``prefix-00000-of-0000N.tfrecord`` when the block ends without an exception
    (:class:`StagedShards`), and replace the dataset that was under ``prefix``: shards of another
    count are removed then (:attr:`replaced`). An exception in the block leaves no shard.
    """

    def __init__(
        self, prefix: str | os.PathLike, num_shards: int = 1, compression: str | None = None
    ):
        super().__init__(prefix, num_shards, compression)
        self._options = tf.io.TFRecordOptions(compression_type=compression or "")
        self._writers: list[tf.io.TFRecordWriter] = []
        self.count = 0

    def __enter__(self) -> ShardedWriter:
        super().__enter__()
        try:
            self._writers = [tf.io.TFRecordWriter(p, self._options) for p in self.staged]
        except BaseException:
            self._close()
            self.discard()
            raise
        return self

    def write(self, record: tf.train.Example | bytes) -> None:
        """Write one Example (or serialized bytes) to the next shard."""
        if isinstance(record, tf.train.Example):
            record = record.SerializeToString(deterministic=True)
        self._writers[self.count % len(self._writers)].write(record)
        self.count += 1

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        try:
            self._close()
        except BaseException:
            self.discard()
            raise
        super().__exit__(exc_type, *exc)

    def _close(self) -> None:
        for writer in self._writers:
            writer.close()


def write_tfrecords(
    records: Iterable[tf.train.Example | bytes],
    prefix: str | os.PathLike,
    num_shards: int = 1,
    compression: str | None = None,
) -> list[str]:
    """Write ``records`` to sharded TFRecord files; returns the shard paths.

    The shards replace the dataset that was under ``prefix`` (see :class:`ShardedWriter`);
    an exception while writing leaves no shard.
    """
    with ShardedWriter(prefix, num_shards, compression) as writer:
        for record in records:
            writer.write(record)
    return writer.paths
