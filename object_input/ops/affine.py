"""Rotation by any angle and random affine transforms: one matrix, applied by :mod:`transform`.

Both steps sample a forward 3 × 3 matrix in pixel coordinates about the image centre and hand it
to :class:`transform.Affine`, which resamples the image with ``ImageProjectiveTransformV3`` (same
size out, ``fill_value`` where nothing maps; a matrix without rotation or shear samples the same
points through ``crop_and_resize``, 2-3x faster), masks with nearest neighbour, moves keypoints
(lost outside the image) and replaces each box by the clipped hull of its moved corners. With masks
present and ``boxes_from_masks``, a box becomes instead the tight box of its moved mask, which
hugs the object where the hull of a rotated box grows.

With ``output_size`` a step warps straight to that size: the resize's scale joins the matrix, so
one resampling at the composed coordinates replaces warp-then-resize (the image comes out float32
as from a resize). Both steps declare it on their registration (``output_size``), so that a
pipeline resizing right after them (``make_dataset(image_size=...)``) folds its resize into them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import (
    _batched as device,
)
from object_input.ops import (
    _core as core,
)
from object_input.ops import (
    _draws as draws,
)
from object_input.ops import (
    _transform as transform,
)
from object_input.ops._backend import TENSORFLOW
from object_input.ops._image_ops import about_centre, rotate_matrix, rotation
from object_input.ops._registry import (
    MOVED,
    PER_BOX,
    in_range,
    positive,
    range_pair,
    register_step,
    rule,
)

_AFFINE_FIELDS = (MOVED, PER_BOX)


@rule("(height, width), both > 0")
def _size_check(value: tuple[int, int]) -> str | None:
    return None if all(positive(side) is None for side in value) else "must be > 0 on both sides"


@rule("NEAREST or BILINEAR")
def _interpolation_check(value: str) -> str | None:
    return None if value in transform.INTERPOLATIONS else "must be NEAREST or BILINEAR"


def mask_boxes(masks: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Tight normalized boxes of ``[N, H, W]`` masks, and whether each mask has any pixel."""
    height, width = tf.shape(masks)[1], tf.shape(masks)[2]
    rows = tf.reduce_any(masks > 0, axis=2)
    cols = tf.reduce_any(masks > 0, axis=1)

    def extent(hits: tf.Tensor, size: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        index = tf.range(size)[tf.newaxis]
        first = tf.reduce_min(tf.where(hits, index, size), axis=1)
        last = tf.reduce_max(tf.where(hits, index + 1, 0), axis=1)
        scale = tf.cast(size, tf.float32)
        return tf.cast(first, tf.float32) / scale, tf.cast(last, tf.float32) / scale

    ymin, ymax = extent(rows, height)
    xmin, xmax = extent(cols, width)
    return tf.stack([ymin, xmin, ymax, xmax], axis=1), tf.reduce_any(rows, axis=1)


def warp_example(
    features: core.Features,
    matrix: tf.Tensor,
    *,
    fill_value: float,
    interpolation: str,
    boxes_from_masks: bool,
    output_size: tuple[int, int] | None = None,
    size: tuple[Any, Any] | None = None,
) -> core.Features:
    """Apply the forward pixel ``matrix`` to every field, then resize to ``output_size`` (when
    given) in the same resampling; see the module docstring. ``size`` is the image's (height,
    width), read from the image when None (the device stage warps the other fields alone)."""
    if size is None:
        size = core.image_size(features[fields.IMAGE])
    if output_size is not None:
        height, width = (tf.cast(side, tf.float32) for side in size)
        resize = transform.scale_matrix(output_size[1] / width, output_size[0] / height)
        matrix = resize @ matrix
    affine = transform.Affine(
        size, matrix, fill_value=fill_value, interpolation=interpolation, output_size=output_size
    )
    out = transform.apply(features, affine)
    if boxes_from_masks and fields.MASKS in out and fields.BOXES in out:
        tight, has_pixels = mask_boxes(out[fields.MASKS])
        out[fields.BOXES] = tf.where(has_pixels[:, tf.newaxis], tight, out[fields.BOXES])
    return out


def _rotation_matrix(
    features: core.Features, seed: Any, *, max_angle: float, probability: float, **params: Any
) -> draws.Drawn:
    """random_rotation's draw: its forward pixel ``matrix`` for the example's image."""
    del params
    gate_seed, angle_seed = core.split_seed(seed, 2)
    angle = core.uniform(angle_seed, -max_angle, max_angle)
    angle = tf.where(core.bernoulli(gate_seed, probability), angle, 0.0)
    height, width = core.image_size(features[fields.IMAGE])
    return {"matrix": rotate_matrix(angle, height, width)}


def _affine_matrix(
    features: core.Features,
    seed: Any,
    *,
    max_rotation: float,
    max_shear: float,
    max_translation: float,
    scale_range: tuple[float, float],
    **params: Any,
) -> draws.Drawn:
    """random_affine's draw: its forward pixel ``matrix`` for the example's image."""
    del params
    scale_seed, shear_seed, angle_seed, shift_seed = core.split_seed(seed, 4)
    scale = core.uniform(scale_seed, scale_range[0], scale_range[1])
    shear = core.uniform(shear_seed, -max_shear, max_shear, shape=[2]) * (math.pi / 180.0)
    angle = core.uniform(angle_seed, -max_rotation, max_rotation)
    shift = core.uniform(shift_seed, -max_translation, max_translation, shape=[2])
    height, width = core.image_size(features[fields.IMAGE])
    turn = tf.stack([tf.stack(row) for row in rotation(angle)])
    shear_matrix = tf.stack([tf.stack([1.0, tf.tan(shear[0])]), tf.stack([tf.tan(shear[1]), 1.0])])
    linear = turn @ shear_matrix * scale
    shift_x = shift[0] * tf.cast(width, tf.float32)
    shift_y = shift[1] * tf.cast(height, tf.float32)
    return {"matrix": about_centre(height, width, linear, shift_x, shift_y)}


def _resizes(params: Mapping[str, Any]) -> str | None:
    if params.get("output_size") is not None:
        return "has output_size set: a step that changes the image size stays on the host"
    return None


def _warp_draw(sample: Callable[..., draws.Drawn]) -> draws.Draw:
    """A warp step's draw: its matrix (``sample``), every field but the image moved exactly as
    the step moves them, and the matrix in normalized coordinates for the batch."""

    def annotate(features, drawn, size, *, fill_value, interpolation, boxes_from_masks, **params):
        del params  # output_size is None: see _resizes
        moved = warp_example(
            features,
            drawn["matrix"],
            fill_value=fill_value,
            interpolation=interpolation,
            boxes_from_masks=boxes_from_masks,
            size=size,
        )
        return moved, drawn

    def encode(drawn, size, **params):
        del params
        return [device.normalized_matrix(drawn["matrix"], *size)]

    return draws.Draw(sample, annotate, encode)


def _warp_batch(images, parameters, xp=TENSORFLOW, *, fill_value, interpolation, **params):
    """A batch warped by each image's normalized matrix."""
    del params
    return device.warp(images, parameters, fill_value, interpolation, xp)


_DEVICE_WARP = device.DeviceStep(_warp_batch, size=6, fidelity="distribution", blocker=_resizes)


@register_step(
    reads=_AFFINE_FIELDS,
    writes=_AFFINE_FIELDS,
    kind="geometry",
    checks={
        "max_angle": in_range(0.0, 180.0),
        "probability": in_range(0.0, 1.0),
        "interpolation": _interpolation_check,
        "output_size": _size_check,
    },
    demo_params={"max_angle": 60.0},
    output_size="output_size",
    draw=_warp_draw(_rotation_matrix),
    device=_DEVICE_WARP,
    tunable=("max_angle", "probability"),
)
def random_rotation(
    features: core.Features,
    drawn: draws.Drawn,
    *,
    max_angle: float = 10.0,
    probability: float = 1.0,
    fill_value: float = 0.0,
    interpolation: str = "BILINEAR",
    boxes_from_masks: bool = True,
    output_size: tuple[int, int] | None = None,
) -> core.Features:
    """With ``probability``, rotate by an angle U(−max_angle, max_angle) degrees about the centre.

    Positive angles turn the content counter-clockwise. The image keeps its size: corners are cut
    and uncovered pixels are ``fill_value``. Boxes are the clipped hulls of their rotated corners,
    or, with masks and ``boxes_from_masks``, the tight boxes of the rotated masks; boxes rotated
    out of the image are dropped with every per-box field; keypoints leaving it are lost.
    With ``output_size`` (height, width) the result is also resized to it, in the same
    resampling (float32 image).
    """
    del max_angle, probability
    return warp_example(
        features,
        drawn["matrix"],
        fill_value=fill_value,
        interpolation=interpolation,
        boxes_from_masks=boxes_from_masks,
        output_size=output_size,
    )


@register_step(
    reads=_AFFINE_FIELDS,
    writes=_AFFINE_FIELDS,
    kind="geometry",
    checks={
        "max_rotation": in_range(0.0, 180.0),
        "max_shear": in_range(0.0, 60.0),
        "max_translation": in_range(0.0, 1.0),
        "scale_range": range_pair(0.01, 100.0),
        "interpolation": _interpolation_check,
        "output_size": _size_check,
    },
    demo_params={"max_rotation": 30.0, "max_shear": 10.0, "max_translation": 0.3},
    output_size="output_size",
    draw=_warp_draw(_affine_matrix),
    device=_DEVICE_WARP,
    tunable=("max_rotation", "max_shear", "max_translation", "scale_range"),
)
def random_affine(
    features: core.Features,
    drawn: draws.Drawn,
    *,
    max_rotation: float = 0.0,
    max_shear: float = 0.0,
    max_translation: float = 0.0,
    scale_range: tuple[float, float] = (1.0, 1.0),
    fill_value: float = 0.0,
    interpolation: str = "BILINEAR",
    boxes_from_masks: bool = True,
    output_size: tuple[int, int] | None = None,
) -> core.Features:
    """One random affine matrix about the centre: scale, shear, rotation, then translation.

    Per image: scale U(scale_range) (both axes), shear angles U(−max_shear, max_shear) degrees
    along x and along y, rotation U(−max_rotation, max_rotation) degrees, translation
    U(−max_translation, max_translation) × width (x) and × height (y). The defaults are the
    identity. Fields move, and ``output_size`` resizes, as in :func:`random_rotation`.
    """
    del max_rotation, max_shear, max_translation, scale_range
    return warp_example(
        features,
        drawn["matrix"],
        fill_value=fill_value,
        interpolation=interpolation,
        boxes_from_masks=boxes_from_masks,
        output_size=output_size,
    )
