"""Box format conversions between object_input, Keras 3, KerasHub, COCO, Pascal VOC and YOLO.

Inside the pipeline boxes are ``rel_yxyx``: normalized ``[ymin, xmin, ymax, xmax]``. The other
formats, by their Keras 3 names (case-insensitive):

| format | coordinates | frame |
|---|---|---|
| ``xyxy`` | ``[xmin, ymin, xmax, ymax]`` | pixels |
| ``yxyx`` | ``[ymin, xmin, ymax, xmax]`` | pixels |
| ``xywh`` | ``[xmin, ymin, width, height]`` | pixels |
| ``center_xywh`` | ``[x_center, y_center, width, height]`` | pixels |
| ``center_yxhw`` | ``[y_center, x_center, height, width]`` | pixels |
| ``rel_`` + any of those | the same | fractions of the image height and width |

Aliases: ``pascal_voc`` is ``xyxy``, ``coco`` is ``xywh``, ``yolo`` is ``rel_center_xywh``.
Converting between a pixel and a relative format needs the image's ``(height, width)``.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

BASE_FORMATS = ("xyxy", "yxyx", "xywh", "center_xywh", "center_yxhw")
FORMATS = BASE_FORMATS + tuple(f"rel_{name}" for name in BASE_FORMATS)
ALIASES = {"pascal_voc": "xyxy", "coco": "xywh", "yolo": "rel_center_xywh"}
INTERNAL_FORMAT = "rel_yxyx"


def canonical_format(name: str) -> str:
    """The Keras 3 name of a box format (aliases resolved, lower case); ValueError if unknown."""
    key = name.lower() if isinstance(name, str) else name
    key = ALIASES.get(key, key)
    if key not in FORMATS:
        raise ValueError(
            f"unknown box format {name!r}; known formats: {', '.join(FORMATS)} "
            f"(aliases: {', '.join(f'{a}={t}' for a, t in ALIASES.items())})"
        )
    return key


def is_relative(name: str) -> bool:
    """Whether a box format is relative to the image size (``rel_*`` or ``yolo``)."""
    return canonical_format(name).startswith("rel_")


def _to_yxyx(boxes: tf.Tensor, base: str) -> tf.Tensor:
    a, b, c, d = tf.unstack(boxes, num=4, axis=-1)
    if base == "yxyx":
        return boxes
    if base == "xyxy":
        corners = (b, a, d, c)
    elif base == "xywh":
        corners = (b, a, b + d, a + c)
    elif base == "center_xywh":
        corners = (b - d / 2, a - c / 2, b + d / 2, a + c / 2)
    else:  # center_yxhw
        corners = (a - c / 2, b - d / 2, a + c / 2, b + d / 2)
    return tf.stack(corners, axis=-1)


def _from_yxyx(boxes: tf.Tensor, base: str) -> tf.Tensor:
    ymin, xmin, ymax, xmax = tf.unstack(boxes, num=4, axis=-1)
    if base == "yxyx":
        return boxes
    if base == "xyxy":
        values = (xmin, ymin, xmax, ymax)
    elif base == "xywh":
        values = (xmin, ymin, xmax - xmin, ymax - ymin)
    elif base == "center_xywh":
        values = ((xmin + xmax) / 2, (ymin + ymax) / 2, xmax - xmin, ymax - ymin)
    else:  # center_yxhw
        values = ((ymin + ymax) / 2, (xmin + xmax) / 2, ymax - ymin, xmax - xmin)
    return tf.stack(values, axis=-1)


def _yxyx_scale(image_shape: Any, dtype: tf.DType) -> tf.Tensor:
    """``[h, w, h, w]`` of ``image_shape`` (``[..., 2+]``), broadcastable over ``[..., N, 4]``."""
    shape = tf.cast(tf.convert_to_tensor(image_shape), dtype)
    if shape.shape.rank == 0:
        raise ValueError(f"image_shape must be (height, width), got {image_shape!r}")
    scale = tf.stack([shape[..., 0], shape[..., 1], shape[..., 0], shape[..., 1]], axis=-1)
    # A batch of image shapes [B, 2] scales boxes [B, N, 4]: one row per image, shared by its N.
    return scale if shape.shape.rank == 1 else scale[..., tf.newaxis, :]


def convert(boxes: Any, source: str, target: str, image_shape: Any = None) -> tf.Tensor:
    """Convert boxes ``[..., 4]`` from the ``source`` format to the ``target`` format.

    Args:
      boxes: a tensor or array ``[..., 4]``; integer boxes are converted as float32.
      source, target: format names (see the module docstring); case-insensitive.
      image_shape: ``(height, width)`` of the image (extra trailing values such as channels are
        ignored), or ``[B, 2]`` for boxes ``[B, N, 4]``; needed only between a pixel and a
        relative format.

    Returns:
      A float tensor of the same shape. Works eagerly and inside ``tf.function`` / ``tf.data``.

    Raises:
      ValueError: an unknown format, a last dimension other than 4, or a missing ``image_shape``.
    """
    source, target = canonical_format(source), canonical_format(target)
    boxes = tf.convert_to_tensor(boxes)
    if not boxes.dtype.is_floating:
        boxes = tf.cast(boxes, tf.float32)
    if boxes.shape.rank is not None and boxes.shape.rank > 0 and boxes.shape[-1] not in (4, None):
        raise ValueError(f"boxes must have 4 values in their last dimension, got {boxes.shape}")
    if source == target:
        return boxes
    from_relative, to_relative = source.startswith("rel_"), target.startswith("rel_")
    if from_relative != to_relative and image_shape is None:
        raise ValueError(
            f"converting boxes from {source!r} to {target!r} needs image_shape=(height, width)"
        )
    yxyx = _to_yxyx(boxes, source.removeprefix("rel_"))
    if from_relative and not to_relative:
        yxyx = yxyx * _yxyx_scale(image_shape, boxes.dtype)
    elif to_relative and not from_relative:
        yxyx = yxyx / _yxyx_scale(image_shape, boxes.dtype)
    return _from_yxyx(yxyx, target.removeprefix("rel_"))
