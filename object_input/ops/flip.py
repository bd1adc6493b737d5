"""Flips and 90° rotation: image, boxes, masks and keypoints move together."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from object_input import fields
from object_input.ops import core, deferred
from object_input.ops.registry import in_range, register_step


def _permute_keypoints(
    features: core.Features, permutation: Sequence[int] | None, step: str
) -> core.Features:
    if fields.KEYPOINTS not in features:
        # A copy: callers assign into the result, and the input dict must stay untouched.
        return dict(features)
    if permutation is None:
        raise ValueError(
            f"{step}: the example has keypoints, so a keypoint permutation is required "
            "(left and right keypoints swap under this transform)"
        )
    num_keypoints = features[fields.KEYPOINTS].shape[1]
    if num_keypoints is not None and sorted(permutation) != list(range(num_keypoints)):
        raise ValueError(
            f"{step}: keypoint permutation {list(permutation)} is not a permutation of "
            f"0..{num_keypoints - 1}"
        )
    out = dict(features)
    out[fields.KEYPOINTS] = tf.gather(out[fields.KEYPOINTS], permutation, axis=1)
    if fields.KEYPOINT_VISIBILITIES in out:
        out[fields.KEYPOINT_VISIBILITIES] = tf.gather(
            out[fields.KEYPOINT_VISIBILITIES], permutation, axis=1
        )
    return out


def flip_left_right(
    features: core.Features, keypoint_flip_permutation: Sequence[int] | None = None
) -> core.Features:
    """Mirror the example left-right (deterministic)."""
    out = _permute_keypoints(features, keypoint_flip_permutation, "flip_left_right")
    out[fields.IMAGE] = tf.reverse(out[fields.IMAGE], axis=[1])
    if deferred.is_deferred(out):
        out[fields.IMAGE_VIEW] = deferred.flip_view(out, axis=1)
    if fields.BOXES in out:
        ymin, xmin, ymax, xmax = tf.unstack(out[fields.BOXES], axis=1)
        out[fields.BOXES] = tf.stack([ymin, 1.0 - xmax, ymax, 1.0 - xmin], axis=1)
    if fields.MASKS in out:
        out[fields.MASKS] = tf.reverse(out[fields.MASKS], axis=[2])
    if fields.KEYPOINTS in out:
        y, x = tf.unstack(out[fields.KEYPOINTS], axis=2)
        out[fields.KEYPOINTS] = tf.stack([y, 1.0 - x], axis=2)
    return out


def flip_up_down(
    features: core.Features, keypoint_flip_permutation: Sequence[int] | None = None
) -> core.Features:
    """Mirror the example top-bottom (deterministic)."""
    out = _permute_keypoints(features, keypoint_flip_permutation, "flip_up_down")
    out[fields.IMAGE] = tf.reverse(out[fields.IMAGE], axis=[0])
    if deferred.is_deferred(out):
        out[fields.IMAGE_VIEW] = deferred.flip_view(out, axis=0)
    if fields.BOXES in out:
        ymin, xmin, ymax, xmax = tf.unstack(out[fields.BOXES], axis=1)
        out[fields.BOXES] = tf.stack([1.0 - ymax, xmin, 1.0 - ymin, xmax], axis=1)
    if fields.MASKS in out:
        out[fields.MASKS] = tf.reverse(out[fields.MASKS], axis=[1])
    if fields.KEYPOINTS in out:
        y, x = tf.unstack(out[fields.KEYPOINTS], axis=2)
        out[fields.KEYPOINTS] = tf.stack([1.0 - y, x], axis=2)
    return out


def rotate90(
    features: core.Features, keypoint_rot_permutation: Sequence[int] | None = None
) -> core.Features:
    """Rotate the example 90° counter-clockwise (deterministic); height and width swap."""
    if deferred.is_deferred(features):
        raise ValueError("rotate90 cannot run on a deferred (not yet decoded) image")
    out = _permute_keypoints(features, keypoint_rot_permutation, "rotate90")
    out = core.set_image(out, tf.image.rot90(out[fields.IMAGE]))
    if fields.BOXES in out:
        ymin, xmin, ymax, xmax = tf.unstack(out[fields.BOXES], axis=1)
        out[fields.BOXES] = tf.stack([1.0 - xmax, ymin, 1.0 - xmin, ymax], axis=1)
    if fields.MASKS in out:
        # Counter-clockwise rotation of [N, H, W]: new[i, j] = old[j, W - 1 - i].
        out[fields.MASKS] = tf.reverse(tf.transpose(out[fields.MASKS], [0, 2, 1]), axis=[1])
    if fields.KEYPOINTS in out:
        y, x = tf.unstack(out[fields.KEYPOINTS], axis=2)
        out[fields.KEYPOINTS] = tf.stack([1.0 - x, y], axis=2)
    return out


def _maybe(transform, features, seed, probability, permutation):
    if fields.KEYPOINTS in features:
        # Raise the missing-permutation error at build time, not inside tf.cond.
        _permute_keypoints(features, permutation, transform.__name__)
    return tf.cond(
        core.bernoulli(seed, probability),
        lambda: transform(features, permutation),
        lambda: dict(features),
    )


@register_step(
    reads=core.GEOMETRY_FIELDS,
    writes=core.GEOMETRY_FIELDS,
    kind="geometry",
    checks={"probability": in_range(0.0, 1.0)},
)
def random_horizontal_flip(
    features: core.Features,
    *,
    seed=None,
    keypoint_flip_permutation: Sequence[int] | None = None,
    probability: float = 0.5,
) -> core.Features:
    """Flip left-right with ``probability``; keypoints are permuted (left ↔ right)."""
    return _maybe(flip_left_right, features, seed, probability, keypoint_flip_permutation)


@register_step(
    reads=core.GEOMETRY_FIELDS,
    writes=core.GEOMETRY_FIELDS,
    kind="geometry",
    checks={"probability": in_range(0.0, 1.0)},
)
def random_vertical_flip(
    features: core.Features,
    *,
    seed=None,
    keypoint_flip_permutation: Sequence[int] | None = None,
    probability: float = 0.5,
) -> core.Features:
    """Flip top-bottom with ``probability``; keypoints are permuted."""
    return _maybe(flip_up_down, features, seed, probability, keypoint_flip_permutation)


@register_step(
    reads=core.GEOMETRY_FIELDS,
    writes=(*core.GEOMETRY_FIELDS, fields.IMAGE_SHAPE),
    kind="geometry",
    checks={"probability": in_range(0.0, 1.0)},
)
def random_rotation90(
    features: core.Features,
    *,
    seed=None,
    keypoint_rot_permutation: Sequence[int] | None = None,
    probability: float = 0.5,
) -> core.Features:
    """Rotate 90° counter-clockwise with ``probability``; height and width swap."""
    # Both tf.cond branches must return the same keys, and rotate90 always sets IMAGE_SHAPE.
    features = core.set_image(features, features[fields.IMAGE])
    return _maybe(rotate90, features, seed, probability, keypoint_rot_permutation)
