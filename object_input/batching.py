"""Batching: box-count limits, dynamic or static padding, and the exact inverse ``unpad_batch``.

Padding is made reversible by side fields: ``NUM_BOXES`` for every per-box field, ``IMAGE_SHAPE``
for the image (and the spatial dims of masks), and ``<name>_shape`` for any other field whose shape
varies between examples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from object_input import fields
from object_input.reliability import errors

BATCHING_MODES = ("dynamic", "static")
OVERFLOW_POLICIES = ("error", "truncate")


def limit_boxes(features: dict, max_boxes: int | None, on_overflow: str = "error") -> dict:
    """Enforce ``max_boxes``: raise naming the record, or keep the first ``max_boxes`` and count.

    Adds ``NUM_BOXES`` and ``NUM_DROPPED_BOXES`` (boxes cut here added to any counted upstream).
    """
    if on_overflow not in OVERFLOW_POLICIES:
        raise ValueError(f"on_overflow must be one of {OVERFLOW_POLICIES}, got {on_overflow!r}")
    out = dict(features)
    num = tf.shape(out[fields.BOXES])[0]
    dropped = out.get(fields.NUM_DROPPED_BOXES, tf.constant(0, tf.int32))
    if max_boxes is not None:
        if on_overflow == "error":
            out = errors.check_features(
                out,
                num <= max_boxes,
                "too_many_boxes",
                "has",
                num,
                f"boxes, more than max_boxes={max_boxes}; raise max_boxes or pass "
                "box_overflow='truncate' to keep the first max_boxes and count the rest",
            )
        else:
            dropped += tf.maximum(num - max_boxes, 0)
            num = tf.minimum(num, max_boxes)
            for name in fields.per_box_fields():
                if name in out:
                    out[name] = out[name][:max_boxes]
    out[fields.NUM_BOXES] = num
    out[fields.NUM_DROPPED_BOXES] = dropped
    return out


def prepare(features: dict, max_boxes: int | None, on_overflow: str = "error") -> dict:
    """Everything one example needs before :func:`batch_features`: box limit and shape fields.

    It runs inside the pipeline's parallel per-example map, not as a stage of its own. Examples
    without boxes (classification data) have no box limit to enforce.
    """
    if fields.BOXES in features:
        features = limit_boxes(features, max_boxes, on_overflow)
    return add_shape_fields(features)


def add_shape_fields(features: dict) -> dict:
    """Record the true shape of every field whose shape varies and that no other field covers."""
    out = dict(features)
    for name, value in features.items():
        if name in (fields.IMAGE, fields.MASKS) or not isinstance(value, tf.Tensor):
            continue
        dims = value.shape.as_list() if value.shape.rank is not None else None
        if dims is None:
            raise ValueError(f"field {name!r} has unknown rank; it cannot be batched")
        unknown = [i for i, d in enumerate(dims) if d is None]
        if fields.is_per_box(name):
            unknown = [i for i in unknown if i > 0]
        if unknown:
            out[fields.shape_key(name)] = tf.shape(value, out_type=tf.int32)
    return out


def check_fits(features: dict, height: int, width: int) -> dict:
    """Assert the image fits in ``height`` × ``width`` (static padding), naming the record."""
    shape = tf.shape(features[fields.IMAGE])
    return errors.check_features(
        features,
        (shape[0] <= height) & (shape[1] <= width),
        "too_large_to_pad",
        "has an image of size",
        shape[:2],
        f"larger than pad_image_size=({height}, {width})",
    )


def padded_shapes(
    element_spec: Mapping[str, tf.TensorSpec],
    mode: str,
    max_boxes: int | None = None,
    image_size: Sequence[int] | None = None,
) -> dict[str, list]:
    """``padded_batch`` shapes: batch maxima (dynamic) or fixed ``max_boxes``/``image_size``.

    Static batching needs ``max_boxes`` only when the examples have per-box fields.
    """
    if mode not in BATCHING_MODES:
        raise ValueError(f"batching must be one of {BATCHING_MODES}, got {mode!r}")
    shapes = {}
    for name, spec in element_spec.items():
        dims: list[Any] = spec.shape.as_list()
        if mode == "static":
            if fields.is_per_box(name):
                if max_boxes is None:
                    raise ValueError(
                        f"static batching needs max_boxes: the examples have per-box field {name!r}"
                    )
                dims[0] = max_boxes
            if name == fields.IMAGE:
                dims[:2] = list(image_size)
            if name == fields.MASKS:
                dims[1:3] = list(image_size)
        shapes[name] = [-1 if d is None else d for d in dims]
    return shapes


def batch_features(
    dataset: tf.data.Dataset,
    batch_size: int,
    *,
    mode: str = "dynamic",
    max_boxes: int | None = None,
    image_size: Sequence[int] | None = None,
    drop_remainder: bool = False,
    group_by_aspect_ratio: bool = False,
) -> tf.data.Dataset:
    """Pad and batch a dataset of feature dicts prepared by :func:`prepare`.

    ``group_by_aspect_ratio`` (dynamic batching only) batches together examples whose images
    fall in the same width / height bucket (:data:`ASPECT_BOUNDARIES`), so that tall and wide
    images do not pad each other to squares. Each bucket fills its own batches; the order of the
    stream is kept within a bucket, and the last partial batch of each bucket comes out at the
    end (dropped with ``drop_remainder``).
    """
    if mode == "static" and image_size is None:
        raise ValueError("static batching needs a fixed image size")
    shapes = padded_shapes(dataset.element_spec, mode, max_boxes, image_size)
    if not group_by_aspect_ratio:
        return dataset.padded_batch(batch_size, shapes, drop_remainder=drop_remainder)
    if mode != "dynamic":
        raise ValueError("group_by_aspect_ratio needs batching='dynamic' (static has one size)")
    return dataset.group_by_window(
        aspect_bucket,
        lambda _, window: window.padded_batch(batch_size, shapes, drop_remainder=drop_remainder),
        window_size=batch_size,
    )


# Width / height boundaries of the aspect-ratio buckets: portrait, square-ish and landscape in
# steps of about a third on a log scale.
ASPECT_BOUNDARIES = (0.5, 0.75, 0.95, 1.05, 4 / 3, 2.0)


def aspect_bucket(features: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """The int64 aspect-ratio bucket of an example's image (see :data:`ASPECT_BOUNDARIES`)."""
    shape = tf.shape(features[fields.IMAGE])
    ratio = tf.cast(shape[1], tf.float32) / tf.cast(tf.maximum(shape[0], 1), tf.float32)
    return tf.reduce_sum(tf.cast(ratio >= tf.constant(ASPECT_BOUNDARIES), tf.int64))


def unpad_batch(batch: Mapping[str, Any]) -> list[dict[str, np.ndarray]]:
    """Split a padded batch back into per-example dicts, exactly as they were before padding."""
    arrays = {k: v.numpy() if hasattr(v, "numpy") else np.asarray(v) for k, v in batch.items()}
    has_boxes = any(fields.is_per_box(k) for k in arrays)
    if (has_boxes and fields.NUM_BOXES not in arrays) or (
        fields.IMAGE in arrays and fields.IMAGE_SHAPE not in arrays
    ):
        raise ValueError("batch lacks num_boxes/image_shape: it was not made by object_input")
    shape_fields = {fields.shape_key(k) for k in arrays} & set(arrays) - {fields.IMAGE_SHAPE}
    examples = []
    for i in range(len(next(iter(arrays.values())))):
        n = int(arrays[fields.NUM_BOXES][i]) if has_boxes else 0
        if fields.IMAGE_SHAPE in arrays:
            h, w = (int(d) for d in arrays[fields.IMAGE_SHAPE][i][:2])
        example = {}
        for name, value in arrays.items():
            if name in shape_fields:
                continue
            item = value[i]
            if name == fields.IMAGE:
                item = item[:h, :w]
            elif name == fields.MASKS:
                item = item[:n, :h, :w]
            elif fields.shape_key(name) in arrays:
                true_shape = arrays[fields.shape_key(name)][i]
                item = item[tuple(slice(0, int(d)) for d in true_shape)]
            elif fields.is_per_box(name):
                item = item[:n]
            example[name] = item
        examples.append(example)
    return examples
