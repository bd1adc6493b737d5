"""Fused colour: a run of colour steps applied as one per-image affine transform.

Brightness, contrast, hue and random grayscale are affine maps of a pixel's RGB value (hue as a
rotation about the gray axis), so a run of them composes into one 3×3 matrix and offset per image,
applied in one pass. Saturation follows the exact HSV rule (distance below the pixel's max channel
scaled, capped so no channel goes below 0) and is applied where it stands in the run. The random
draws are exactly those of the separate steps (each step keeps its own seed); what differs from
running the steps one by one is documented in ``docs/performance.md``:

- hue rotates about the gray axis instead of around the HSV hexcone;
- values are clipped to [0, 255] only where the run is split (before a saturation step) and at the
  end, not after every step;
- contrast uses the per-channel mean carried through the affine maps, which equals the mean of the
  unclipped intermediate image.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import color, core
from object_input.ops.registry import get_step

FUSABLE = frozenset(
    {
        "random_adjust_brightness",
        "random_adjust_contrast",
        "random_adjust_hue",
        "random_adjust_saturation",
        "random_distort_color",
        "random_rgb_to_gray",
    }
)

_DISTORT_ORDER = {
    0: ("brightness", "saturation", "hue", "contrast"),
    1: ("brightness", "contrast", "saturation", "hue"),
}


def hue_rotation(delta: tf.Tensor) -> tf.Tensor:
    """3×3 rotation about the gray axis by ``delta`` turns (red → green for delta > 0)."""
    theta = 2.0 * math.pi * tf.cast(delta, tf.float32)
    cos, sin = tf.cos(theta), tf.sin(theta)
    third = (1.0 - cos) / 3.0
    s = sin / math.sqrt(3.0)
    # Rodrigues' formula for the unit axis (1, 1, 1) / sqrt(3).
    return tf.stack(
        [
            tf.stack([cos + third, third - s, third + s]),
            tf.stack([third + s, cos + third, third - s]),
            tf.stack([third - s, third + s, cos + third]),
        ]
    )


def _affine(flat: tf.Tensor, matrix: tf.Tensor, offset: tf.Tensor) -> tf.Tensor:
    return tf.clip_by_value(tf.matmul(flat, matrix, transpose_b=True) + offset, 0.0, 255.0)


def _saturate(rgb: tf.Tensor, factor: tf.Tensor) -> tf.Tensor:
    value = tf.reduce_max(rgb, axis=-1, keepdims=True)
    chroma = value - tf.reduce_min(rgb, axis=-1, keepdims=True)
    ratio = tf.minimum(tf.maximum(factor, 0.0), value / tf.maximum(chroma, 1e-6))
    return value - (value - rgb) * ratio


def _operations(
    steps: Sequence[tuple[str, Mapping[str, Any], Any]],
) -> list[tuple[str, tf.Tensor]]:
    """The elementary (kind, parameter) operations of a run of steps, drawn from their seeds."""
    operations = []
    for name, params, seed in steps:
        drawn = color.COLOR_STEPS[name].sample(seed, params)
        if name == "random_distort_color":
            values = {
                "brightness": drawn["brightness_delta"],
                "saturation": drawn["saturation_factor"],
                "hue": drawn["hue_delta"],
                "contrast": drawn["contrast_factor"],
            }
            operations += [(k, values[k]) for k in _DISTORT_ORDER[params["color_ordering"]]]
        elif name == "random_rgb_to_gray":
            operations.append(("gray", drawn["to_gray"]))
        else:
            kind = name.removeprefix("random_adjust_")
            operations.append((kind, drawn["delta" if kind in ("brightness", "hue") else "factor"]))
    return operations


def apply_fused_color(
    features: core.Features, steps: Sequence[tuple[str, Mapping[str, Any], Any]]
) -> core.Features:
    """Apply a run of colour ``steps`` — ``(name, resolved params, step seed)`` — in one pass.

    Images with fewer than 3 channels run the steps one by one (they are cheap there).
    """
    image = features[fields.IMAGE]
    if image.shape[-1] is None or image.shape[-1] < 3:
        for name, params, seed in steps:
            features = get_step(name).fn(features, seed=seed, **params)
        return features
    rgb, rest = color.split_channels(image, "fused colour")
    flat = tf.reshape(rgb, [-1, 3])
    matrix = tf.eye(3)
    offset = tf.zeros([3])
    mean = None
    pending = False
    for kind, value in _operations(steps):
        if kind == "saturation":
            if pending:
                flat = _affine(flat, matrix, offset)
            flat = tf.clip_by_value(_saturate(flat, value), 0.0, 255.0)
            matrix, offset, mean, pending = tf.eye(3), tf.zeros([3]), None, False
            continue
        pending = True
        if kind == "brightness":
            offset += 255.0 * value
        elif kind == "contrast":
            if mean is None:
                mean = tf.reduce_mean(flat, axis=0)
            current = tf.linalg.matvec(matrix, mean) + offset
            matrix, offset = value * matrix, value * offset + (1.0 - value) * current
        elif kind == "hue":
            rotation = hue_rotation(value)
            matrix, offset = rotation @ matrix, tf.linalg.matvec(rotation, offset)
        elif kind == "gray":
            gray = tf.tile(tf.constant(color.LUMA_WEIGHTS)[tf.newaxis], [3, 1])
            choice = tf.where(value, gray, tf.eye(3))
            matrix, offset = choice @ matrix, tf.linalg.matvec(choice, offset)
    if pending:
        flat = _affine(flat, matrix, offset)
    out = dict(features)
    out[fields.IMAGE] = color.merge_channels(tf.reshape(flat, tf.shape(rgb)), rest)
    return out
