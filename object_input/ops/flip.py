"""Flips and 90° rotation: sampled here, applied to every field by :mod:`transform`."""

from __future__ import annotations

from collections.abc import Sequence

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
from object_input.ops._registry import MOVED, in_range, register_step


def check_permutation(
    features: core.Features, permutation: Sequence[int] | None, step: str
) -> Sequence[int] | None:
    """``permutation``, checked against the example's keypoints (required when it has some)."""
    if fields.KEYPOINTS not in features:
        return permutation
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
    return permutation


def flip_left_right(
    features: core.Features, keypoint_flip_permutation: Sequence[int] | None = None
) -> core.Features:
    """Mirror the example left-right (deterministic)."""
    return maybe_flip(features, 1, None, keypoint_flip_permutation, "flip_left_right")


def flip_up_down(
    features: core.Features, keypoint_flip_permutation: Sequence[int] | None = None
) -> core.Features:
    """Mirror the example top-bottom (deterministic)."""
    return maybe_flip(features, 0, None, keypoint_flip_permutation, "flip_up_down")


def rotate90(
    features: core.Features, keypoint_rot_permutation: Sequence[int] | None = None
) -> core.Features:
    """Rotate the example 90° counter-clockwise (deterministic); height and width swap."""
    permutation = check_permutation(features, keypoint_rot_permutation, "rotate90")
    return transform.apply(features, transform.Rotate90(permutation))


def _maybe(flip, features, seed, probability, permutation):
    # Raise the missing-permutation error at build time, not inside tf.cond.
    check_permutation(features, permutation, flip.__name__)
    return tf.cond(
        core.bernoulli(seed, probability),
        lambda: flip(features, permutation),
        lambda: dict(features),
    )


def maybe_flip(
    features: core.Features,
    axis: int,
    when: tf.Tensor | None,
    permutation: Sequence[int] | None,
    step: str,
) -> core.Features:
    """The example mirrored along image ``axis`` where the scalar bool ``when`` is True
    (always when it is None); ``step`` names the caller in a bad permutation's error.

    Each field is selected on its own (see :class:`transform.Flip`), not by a branch over the
    whole feature dict.
    """
    permutation = check_permutation(features, permutation, step)
    return transform.apply(features, transform.Flip(axis, permutation, when))


def _sample_flip(features, seed, *, probability, **params):
    """Whether the example flips, with ``probability``."""
    del features, params
    return {"flip": core.bernoulli(seed, probability)}


def _flip_draw(axis: int, step: str) -> draws.Draw:
    """A random flip along image ``axis``: the flag drawn, every field but the image flipped
    with it (the image is flipped by the step or on the batch)."""

    def annotate(features, drawn, size, *, keypoint_flip_permutation, **params):
        del size, params
        flipped = maybe_flip(features, axis, drawn["flip"], keypoint_flip_permutation, step)
        return flipped, drawn

    return draws.Draw(_sample_flip, annotate)


def _device_flip(axis: int) -> device.DeviceStep:
    """The pixels of a batch mirrored along image ``axis`` where the flag is set (resizing
    commutes with a mirror)."""

    def apply(images, parameters, xp=TENSORFLOW, **params):
        del params
        return xp.where(device.fires(parameters), xp.reverse(images, [axis + 1]), images)

    return device.DeviceStep(apply, size=1, fidelity="exact")


@register_step(
    reads=(MOVED,),
    writes=(MOVED,),
    kind="geometry",
    checks={"probability": in_range(0.0, 1.0)},
    deferral="view",
    demo_params={"probability": 1.0, "keypoint_flip_permutation": [1, 0]},
    draw=_flip_draw(1, "flip_left_right"),
    device=_device_flip(1),
    tunable=("probability",),
)
def random_horizontal_flip(
    features: core.Features,
    drawn: draws.Drawn,
    *,
    keypoint_flip_permutation: Sequence[int] | None = None,
    probability: float = 0.5,
) -> core.Features:
    """Flip left-right with ``probability``; keypoints are permuted (left ↔ right)."""
    del probability
    return maybe_flip(features, 1, drawn["flip"], keypoint_flip_permutation, "flip_left_right")


@register_step(
    reads=(MOVED,),
    writes=(MOVED,),
    kind="geometry",
    checks={"probability": in_range(0.0, 1.0)},
    deferral="view",
    demo_params={"probability": 1.0, "keypoint_flip_permutation": [0, 1]},
    draw=_flip_draw(0, "flip_up_down"),
    device=_device_flip(0),
    tunable=("probability",),
)
def random_vertical_flip(
    features: core.Features,
    drawn: draws.Drawn,
    *,
    keypoint_flip_permutation: Sequence[int] | None = None,
    probability: float = 0.5,
) -> core.Features:
    """Flip top-bottom with ``probability``; keypoints are permuted."""
    del probability
    return maybe_flip(features, 0, drawn["flip"], keypoint_flip_permutation, "flip_up_down")


@register_step(
    reads=(MOVED,),
    writes=(MOVED,),
    kind="geometry",
    checks={"probability": in_range(0.0, 1.0)},
    demo_params={"probability": 1.0, "keypoint_rot_permutation": [0, 1]},
    tunable=("probability",),
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
