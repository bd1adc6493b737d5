"""Box geometry shared by the crop and pad ops: areas, overlap with a window, frame changes.

A *window* is a float32 ``[4]`` tensor ``[ymin, xmin, ymax, xmax]`` in the same normalized frame as
the boxes. It may lie inside ``[0, 1]`` (a crop) or extend beyond it (a pad). Boxes are ``[N, 4]``
``[ymin, xmin, ymax, xmax]``; keypoints are ``[N, K, 2]`` ``(y, x)``.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import _core as core

UNIT_WINDOW = (0.0, 0.0, 1.0, 1.0)


def _window(window: Any) -> tf.Tensor:
    return tf.cast(tf.convert_to_tensor(window), tf.float32)


def area(boxes: tf.Tensor) -> tf.Tensor:
    """Area of each box; inverted boxes count as 0."""
    ymin, xmin, ymax, xmax = tf.unstack(boxes, num=4, axis=-1)
    return tf.maximum(ymax - ymin, 0.0) * tf.maximum(xmax - xmin, 0.0)


def intersection(boxes: tf.Tensor, window: Any) -> tf.Tensor:
    """Area of the intersection of each box with ``window``."""
    window = _window(window)
    top_left = tf.maximum(boxes[:, :2], window[:2])
    bottom_right = tf.minimum(boxes[:, 2:], window[2:])
    extent = tf.maximum(bottom_right - top_left, 0.0)
    return extent[:, 0] * extent[:, 1]


def within(boxes: tf.Tensor, window: Any) -> tf.Tensor:
    """Whether each box lies entirely inside ``window`` (edges included)."""
    window = _window(window)
    return tf.reduce_all(
        tf.concat([boxes[:, :2] >= window[:2], boxes[:, 2:] <= window[2:]], axis=1), axis=1
    )


def fraction_inside(boxes: tf.Tensor, window: Any) -> tf.Tensor:
    """Fraction of each box's own area that lies inside ``window``.

    A zero-area box has no area to split, so it counts as 1 when it lies within the window and 0
    otherwise (rather than the NaN of 0 / 0, which would silently fail every threshold).
    """
    box_area = area(boxes)
    has_area = box_area > 0.0
    ratio = intersection(boxes, window) / tf.where(has_area, box_area, 1.0)
    return tf.where(has_area, ratio, tf.cast(within(boxes, window), tf.float32))


def fully_outside(boxes: tf.Tensor, window: Any) -> tf.Tensor:
    """Whether each box lies entirely outside ``window``; touching an edge counts as outside."""
    window = _window(window)
    ymin, xmin, ymax, xmax = tf.unstack(boxes, num=4, axis=1)
    return (ymin >= window[2]) | (xmin >= window[3]) | (ymax <= window[0]) | (xmax <= window[1])


def overlaps_window(boxes: tf.Tensor, window: Any, min_fraction: Any) -> tf.Tensor:
    """Keep-mask of a crop: not fully outside ``window`` and ≥ ``min_fraction`` of area inside."""
    return tf.logical_not(fully_outside(boxes, window)) & (
        fraction_inside(boxes, window) >= min_fraction
    )


def clip_to_window(boxes: tf.Tensor, window: Any = UNIT_WINDOW) -> tf.Tensor:
    """Clip every box coordinate into ``window`` (the unit square by default)."""
    window = _window(window)
    low = tf.tile(window[:2], [2])
    high = tf.tile(window[2:], [2])
    return tf.minimum(tf.maximum(boxes, low), high)


def is_degenerate(boxes: tf.Tensor) -> tf.Tensor:
    """Whether each box has zero (or negative) height or width."""
    return (boxes[:, 2] <= boxes[:, 0]) | (boxes[:, 3] <= boxes[:, 1])


def change_box_frame(boxes: tf.Tensor, window: Any) -> tf.Tensor:
    """Boxes re-expressed relative to ``window``: its corners become (0, 0) and (1, 1)."""
    window = _window(window)
    origin = tf.tile(window[:2], [2])
    extent = tf.tile(window[2:] - window[:2], [2])
    return (boxes - origin) / extent


def change_keypoint_frame(keypoints: tf.Tensor, window: Any) -> tf.Tensor:
    """Keypoints ``[..., 2]`` re-expressed relative to ``window``."""
    window = _window(window)
    return (keypoints - window[:2]) / (window[2:] - window[:2])


def in_unit_square(keypoints: tf.Tensor) -> tf.Tensor:
    """Whether each keypoint ``[..., 2]`` lies in [0, 1]²; NaN (unlabeled) counts as outside."""
    return tf.reduce_all((keypoints >= 0.0) & (keypoints <= 1.0), axis=-1)


def to_window_frame(features: core.Features, window: Any, *, clip_boxes: bool) -> core.Features:
    """Move boxes and keypoints of ``features`` into ``window``'s frame.

    Boxes are clipped to [0, 1] when ``clip_boxes``; none are dropped here. Keypoints that end up
    outside [0, 1] become NaN and their visibility False.
    """
    out = dict(features)
    if fields.BOXES in out:
        moved = change_box_frame(out[fields.BOXES], window)
        out[fields.BOXES] = clip_to_window(moved) if clip_boxes else moved
    if fields.KEYPOINTS in out:
        moved = change_keypoint_frame(out[fields.KEYPOINTS], window)
        inside = in_unit_square(moved)
        out[fields.KEYPOINTS] = tf.where(inside[..., tf.newaxis], moved, float("nan"))
        if fields.KEYPOINT_VISIBILITIES in out:
            out[fields.KEYPOINT_VISIBILITIES] = out[fields.KEYPOINT_VISIBILITIES] & inside
    return out


def scale_coordinates(features: core.Features, y_scale: Any, x_scale: Any) -> core.Features:
    """Multiply the y and x coordinates of boxes and keypoints by ``y_scale`` and ``x_scale``."""
    out = dict(features)
    if fields.BOXES in out:
        out[fields.BOXES] = out[fields.BOXES] * tf.stack([y_scale, x_scale, y_scale, x_scale])
    if fields.KEYPOINTS in out:
        out[fields.KEYPOINTS] = out[fields.KEYPOINTS] * tf.stack([y_scale, x_scale])
    return out


def drop_degenerate(features: core.Features) -> core.Features:
    """Drop zero-area boxes, with every per-box field."""
    if fields.BOXES not in features:
        return features
    return core.mask_boxes(features, tf.logical_not(is_degenerate(features[fields.BOXES])))
