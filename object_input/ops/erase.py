"""Random erasing (Cutout): fill rectangles of the image; boxes they hide are dropped or kept.

A box counts as hidden when every pixel it touches lies in the union of the patches. Dropped
boxes take every per-box field with them and are added to ``fields.NUM_DROPPED_BOXES``, so a
batch says how many objects augmentation removed.
"""

from __future__ import annotations

import functools
import operator

import tensorflow as tf

from object_input import fields
from object_input.ops import _batched as device
from object_input.ops import _core as core
from object_input.ops import _draws as draws
from object_input.ops._backend import TENSORFLOW
from object_input.ops._registry import (
    PER_BOX,
    in_range,
    non_negative,
    range_pair,
    register_step,
    rule,
)

COVERED_POLICIES = ("drop", "keep")


@rule("drop or keep")
def _covered_check(value: str) -> str | None:
    return None if value in COVERED_POLICIES else f"must be one of {COVERED_POLICIES}"


def _pixel_extents(boxes: tf.Tensor, height, width) -> tuple[tf.Tensor, tf.Tensor]:
    """``(start, stop)`` ``[N, 2]`` (row, column) of the pixels each normalized box touches.

    A box touches the pixels its extent overlaps, and at least one.
    """
    limit = tf.stack([height, width])
    size = tf.cast(limit, tf.float32)
    clipped = tf.clip_by_value(boxes, 0.0, 1.0)
    start = tf.minimum(tf.cast(tf.floor(clipped[:, :2] * size), tf.int32), limit - 1)
    stop = tf.maximum(tf.cast(tf.math.ceil(clipped[:, 2:] * size), tf.int32), start + 1)
    return start, stop


def hidden_boxes(boxes: tf.Tensor, height, width, corners, extents) -> tf.Tensor:
    """``[N]`` bool: whether every pixel each box touches lies in the union of the patches
    ``[corner, corner + extent)`` (``[P, 2]`` (row, column) each), from the rectangles alone.

    Every touched pixel is covered exactly when, for each box, the pixels at its first row or
    a patch's end row inside it, and its first column or a patch's end column inside it, are:
    a patch covering such a pixel also covers every touched pixel up to the next end.
    """
    start, stop = _pixel_extents(boxes, height, width)
    ends = corners + extents

    def probes(axis: int) -> tf.Tensor:
        # [N, P + 1]: the box's first pixel, and each patch end strictly inside the box.
        first = start[:, axis : axis + 1]
        end = ends[tf.newaxis, :, axis]
        inside = (end > first) & (end < stop[:, axis : axis + 1])
        return tf.concat([first, tf.where(inside, end, first)], axis=1)

    def within(axis: int) -> tf.Tensor:
        # [N, P + 1, P]: whether each probe lies in each patch's span along the axis.
        at = probes(axis)[:, :, tf.newaxis]
        low, high = corners[:, axis], ends[:, axis]
        return tf.cast((at >= low) & (at < high), tf.float32)

    covering = tf.matmul(within(0), within(1), transpose_b=True)
    return tf.reduce_all(covering > 0.0, axis=[1, 2])


def _draw_patches(features, seed, *, num_patches, size_range, probability, **params):
    """random_cutout's draw for the example's image: whether it ``fires``, the patches'
    ``corners`` and ``extents`` in pixels (``[P, 2]`` (row, column) each), the ``noise_seed``."""
    del params
    image = features[fields.IMAGE]
    gate_seed, size_seed, place_seed, noise_seed = core.split_seed(seed, 4)
    height, width = core.image_size(image)
    size = tf.cast(tf.stack([height, width]), tf.float32)
    fractions = core.uniform(size_seed, size_range[0], size_range[1], shape=[num_patches, 2])
    extents = tf.maximum(tf.cast(tf.round(fractions * size), tf.int32), 1)
    extents = tf.minimum(extents, tf.stack([height, width]))
    places = core.uniform(place_seed, shape=[num_patches, 2])
    slack = tf.cast(tf.stack([height, width]) - extents + 1, tf.float32)
    corners = tf.minimum(tf.cast(tf.floor(places * slack), tf.int32), tf.cast(slack, tf.int32) - 1)
    return {
        "fires": core.bernoulli(gate_seed, probability),
        "corners": corners,
        "extents": extents,
        "noise_seed": noise_seed,
    }


def _drop_hidden(
    features: core.Features, drawn: draws.Drawn, size, covered_boxes: str
) -> core.Features:
    """``features`` without the boxes the fired patches hide, counted (``covered_boxes="drop"``)."""
    if covered_boxes == "keep" or fields.BOXES not in features:
        return features
    corners, extents = drawn["corners"], drawn["extents"]
    hidden = hidden_boxes(features[fields.BOXES], *size, corners, extents) & drawn["fires"]
    out = core.mask_boxes(features, ~hidden)
    dropped = features.get(fields.NUM_DROPPED_BOXES, tf.constant(0, tf.int32))
    out[fields.NUM_DROPPED_BOXES] = dropped + tf.reduce_sum(tf.cast(hidden, tf.int32))
    return out


def _annotate(features, drawn, size, *, covered_boxes, **params):
    del params
    return _drop_hidden(features, drawn, size, covered_boxes), drawn


def _patch_fractions(drawn, size, *, num_patches, **params):
    """The gate, each patch as fractions of the image, and the noise seed, for the batch."""
    del params
    corners, ends = drawn["corners"], drawn["corners"] + drawn["extents"]
    rectangles = [
        value
        for index in range(num_patches)
        for value in device.normalized_rectangle(
            *tf.unstack(corners[index]), *tf.unstack(ends[index]), *size
        )
    ]
    return [drawn["fires"], *rectangles, *device.seed_parameters(drawn["noise_seed"])]


def _erase_batch(images, parameters, xp=TENSORFLOW, *, num_patches, fill_value, **params):
    """The patches (fractions of the image) of each image of a batch filled where it fired."""
    del params
    if not num_patches:
        return images
    patches = [
        device.rectangle_mask(parameters[:, 1 + 4 * i : 5 + 4 * i], *images.shape[1:3], xp)
        for i in range(num_patches)
    ]
    inside = device.fires(parameters) & functools.reduce(operator.or_, patches)
    if fill_value is None:
        noise = device.uniform_noise(parameters[:, -2:], tuple(images.shape[1:]), 0, xp)
        fill = xp.floor(256.0 * noise)
    else:
        # A scalar broadcast in the select: no image-sized fill.
        fill = float(fill_value)
    return xp.where(inside, fill, images)


@register_step(
    reads=(fields.IMAGE, fields.NUM_DROPPED_BOXES, PER_BOX),
    writes=(fields.IMAGE, fields.NUM_DROPPED_BOXES, PER_BOX),
    kind="geometry",
    checks={
        "num_patches": non_negative,
        "size_range": range_pair(0.0, 1.0),
        "probability": in_range(0.0, 1.0),
        "covered_boxes": _covered_check,
    },
    demo_params={"probability": 1.0, "num_patches": 3, "size_range": (0.4, 0.6)},
    draw=draws.Draw(_draw_patches, _annotate, _patch_fractions),
    device=device.DeviceStep(
        _erase_batch, size=lambda params: 3 + 4 * params["num_patches"], fidelity="distribution"
    ),
    tunable=("size_range", "probability"),
)
def random_cutout(
    features: core.Features,
    drawn: draws.Drawn,
    *,
    num_patches: int = 1,
    size_range: tuple[float, float] = (0.1, 0.3),
    fill_value: float | None = 0.0,
    probability: float = 0.5,
    covered_boxes: str = "drop",
) -> core.Features:
    """With ``probability``, fill ``num_patches`` rectangles with ``fill_value``.

    Each patch's height and width are U(size_range) times the image's (drawn independently, so
    aspect ratios vary), placed uniformly inside the image; patches may overlap. ``fill_value``
    None fills with uniform noise on [0, 255] (random erasing). Boxes entirely hidden by the
    patches are dropped with every per-box field and counted in ``num_dropped_boxes``
    (``covered_boxes="drop"``), or kept (``"keep"``). Masks and keypoints are not changed: the
    object is hidden, not gone. The image keeps its dtype.
    """
    del size_range, probability
    image = features[fields.IMAGE]
    fires, corners, extents = drawn["fires"], drawn["corners"], drawn["extents"]
    ends = corners + extents

    def erase() -> tf.Tensor:
        if fill_value is None:
            noise = core.uniform(drawn["noise_seed"], 0.0, 256.0, shape=tf.shape(image))
            noise = core.like(tf.floor(noise), image.dtype)
        erased = image
        for index in range(num_patches):
            (top, left), (bottom, right) = tf.unstack(corners[index]), tf.unstack(ends[index])
            if fill_value is None:
                patch = noise[top:bottom, left:right]
            else:
                shape = tf.concat([extents[index], tf.shape(image)[2:]], 0)
                patch = core.like(tf.fill(shape, float(fill_value)), image.dtype)
            erased = core.fill_rectangle(erased, patch, corners[index])
        return erased

    out = dict(features)
    out[fields.IMAGE] = tf.cond(fires, erase, lambda: image) if num_patches else image
    return _drop_hidden(out, drawn, core.image_size(image), covered_boxes)
