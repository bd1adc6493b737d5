"""The op contract: geometric ops sample a transform; per-field handlers apply it.

A user's field registered with a handler must move exactly like the built-in field of its kind
through every geometric step: a raster like the image's first channel, points like keypoints.
"""

import numpy as np
import pytest
import tensorflow as tf
from helpers import as_numpy, coord_features, seeds
from hypothesis import given, settings
from hypothesis import strategies as st

from object_input import fields
from object_input.ops import (
    Augmentation,
)
from object_input.ops import (
    _field_handlers as field_handlers,
)
from object_input.ops import (
    _transform as transform,
)

BOXES = [[0.1, 0.2, 0.5, 0.7], [0.4, 0.05, 0.95, 0.4], [0.6, 0.6, 0.9, 0.95]]

# Every geometric step whose image fill is 0 and whose image resampling is nearest (or none), so
# that a nearest-neighbour raster must equal the image's first channel afterwards.
STEPS = [
    ("random_horizontal_flip", {"probability": 1.0, "keypoint_flip_permutation": [0, 1]}),
    ("random_vertical_flip", {"probability": 1.0, "keypoint_flip_permutation": [0, 1]}),
    ("random_rotation90", {"probability": 1.0, "keypoint_rot_permutation": [0, 1]}),
    ("random_crop_image", {"min_object_covered": 0.0, "area_range": (0.2, 0.8)}),
    ("random_pad_image", {"pad_color": [0.0]}),
    ("random_crop_pad_image", {"pad_color": [0.0], "min_object_covered": 0.0}),
    ("random_pad_to_aspect_ratio", {"aspect_ratio": 2.0}),
    ("random_crop_to_aspect_ratio", {"aspect_ratio": 0.5}),
    ("random_square_crop_by_scale", {"max_border": 4}),
    ("resize_image", {"new_height": 9, "new_width": 23, "method": "NEAREST_NEIGHBOR"}),
    (
        "resize_to_range",
        {
            "min_dimension": 9,
            "max_dimension": 20,
            "pad_to_max_dimension": True,
            "method": "NEAREST_NEIGHBOR",
        },
    ),
    ("ssd_random_crop", {}),
    ("random_rotation", {"max_angle": 40.0, "interpolation": "NEAREST"}),
    (
        "random_affine",
        {
            "max_rotation": 20.0,
            "max_shear": 10.0,
            "max_translation": 0.2,
            "interpolation": "NEAREST",
        },
    ),
]


@pytest.fixture(scope="module")
def user_fields():
    """A raster ``heatmap`` [H, W] and per-box points ``centre`` [N, 1, 2] with handlers."""
    fields.register_per_box_field("centre")
    field_handlers.register_handler(
        "heatmap", field_handlers.raster_handler("heatmap", nearest=True)
    )
    field_handlers.register_handler("centre", field_handlers.points_handler("centre"))
    yield
    field_handlers.unregister_handler("heatmap")
    field_handlers.unregister_handler("centre")
    fields.unregister_per_box_field("centre")


def _with_user_fields(features):
    out = dict(features)
    out["heatmap"] = features[fields.IMAGE][..., 0]
    out["centre"] = features[fields.KEYPOINTS][:, :1]
    return out


@pytest.mark.parametrize(("step", "params"), STEPS, ids=[s for s, _ in STEPS])
@settings(max_examples=6, deadline=None)
@given(seed=seeds)
def test_user_fields_move_like_their_builtin_kind(user_fields, step, params, seed):
    features = _with_user_fields(coord_features(12, 17, BOXES))
    out = as_numpy(Augmentation([(step, params)])(features, tf.constant([seed, 7])))
    np.testing.assert_array_equal(out["heatmap"], out[fields.IMAGE][..., 0])
    np.testing.assert_array_equal(out["centre"], out[fields.KEYPOINTS][:, :1])


def test_handlers_of_builtin_fields_cannot_be_replaced():
    with pytest.raises(ValueError, match="built-in handler"):
        field_handlers.register_handler(
            fields.MASKS, field_handlers.raster_handler(fields.MASKS, 1)
        )
    with pytest.raises(ValueError, match="built-in handler"):
        field_handlers.unregister_handler(fields.IMAGE)
    assert field_handlers.handled_fields()[:5] == (
        fields.IMAGE_VIEW,
        fields.IMAGE,
        fields.MASKS,
        fields.BOXES,
        fields.KEYPOINTS,
    )


def test_unsupported_raster_layout_is_named():
    with pytest.raises(ValueError, match="rank 5 with rows on axis 0"):
        transform.Resize(2, 2).raster(tf.zeros([2, 2, 1, 1, 1]), 0, None, nearest=True)


def test_transforms_other_than_flips_and_windows_refuse_a_deferred_image():
    features = {
        fields.IMAGE: tf.zeros([4, 6, 0], tf.uint8),
        fields.IMAGE_VIEW: tf.constant([0, 0, 0, 0, 4, 6]),
        fields.ENCODED_IMAGE: tf.constant(b""),
    }
    flipped = transform.apply(features, transform.Flip(1))
    np.testing.assert_array_equal(flipped[fields.IMAGE_VIEW], [0, 0, 0, 1, 4, 6])
    cropped = transform.apply(features, transform.Window((4, 6), 1, 2, 3, 3))
    np.testing.assert_array_equal(cropped[fields.IMAGE_VIEW], [1, 2, 0, 0, 4, 6])
    with pytest.raises(ValueError, match="resize cannot run on a deferred"):
        transform.apply(features, transform.Resize(2, 3))


@settings(max_examples=10, deadline=None)
@given(height=st.integers(1, 9), width=st.integers(1, 9))
def test_identity_affine_is_the_identity(height, width):
    features = coord_features(height, width, BOXES)
    identity = transform.Affine((height, width), tf.eye(3))
    out = as_numpy(transform.apply(features, identity))
    for name, value in as_numpy(features).items():
        np.testing.assert_allclose(out[name], value, atol=1e-6, err_msg=name)


def _projective(image, matrix, fill, size, interpolation="BILINEAR"):
    """The warp by TensorFlow's projective kernel alone, as in ``transform.warp``; ``image``
    ``[H, W, C]``, or a batch ``[N, H, W, C]`` warped and returned whole."""
    to_index = transform.translate_matrix(-0.5, -0.5)
    inverse = to_index @ tf.linalg.inv(matrix) @ tf.linalg.inv(to_index)
    params = tf.reshape(inverse / inverse[2, 2], [-1])[:8][tf.newaxis]
    warped = tf.raw_ops.ImageProjectiveTransformV3(
        images=image if image.shape.rank == 4 else image[tf.newaxis],
        transforms=params,
        output_shape=size,
        fill_value=fill,
        interpolation=interpolation,
        fill_mode="CONSTANT",
    )
    return warped if image.shape.rank == 4 else warped[0]


@settings(max_examples=30, deadline=None)
@given(
    height=st.integers(1, 9),
    width=st.integers(1, 9),
    shift=st.tuples(st.integers(-12, 12), st.integers(-12, 12)),
    fraction=st.sampled_from([0.0, 0.5, 0.3]),
    channels=st.sampled_from([1, 3]),
    dtype=st.sampled_from([tf.uint8, tf.float32]),
    fill=st.sampled_from([0.0, 128.0]),
)
def test_a_nearest_warp_by_a_shift_moves_pixels_as_the_kernel(
    height, width, shift, fraction, channels, dtype, fill
):
    # Whole-pixel shifts take a window of the raster instead of the kernel: the same pixels,
    # fill and dtype, for images and for mask stacks; fractional shifts still run the kernel.
    rng = np.random.default_rng(height * 100 + width)
    image = tf.cast(rng.integers(1, 255, (height, width, channels)), dtype)
    matrix = transform.translate_matrix(shift[0] + fraction, shift[1])
    got = transform.warp(image, matrix, fill)
    want = _projective(image, matrix, fill, (height, width), "NEAREST")
    assert got.dtype == dtype and got.shape == image.shape
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    if fraction == 0.0:
        # The window itself, whichever path warp picks: the inverse map shifts by -(dx, dy).
        window = transform._shift(image, 0, tf.constant([-shift[0], -shift[1]]), fill)
        np.testing.assert_array_equal(window.numpy(), want.numpy())
    masks = tf.constant(rng.integers(0, 2, (2, height, width)), tf.uint8)
    got_masks = transform.warp(masks, matrix, 0.0, y_axis=1)
    want_masks = _projective(masks[..., tf.newaxis], matrix, 0.0, (height, width), "NEAREST")
    np.testing.assert_array_equal(got_masks.numpy(), want_masks.numpy()[..., 0])


@settings(max_examples=25, deadline=None)
@given(
    height=st.integers(1, 12),
    width=st.integers(1, 12),
    out=st.tuples(st.integers(1, 14), st.integers(1, 14)),
    scale=st.tuples(st.floats(0.3, 3.0), st.floats(0.3, 3.0)),
    shift=st.tuples(st.floats(-8.0, 8.0), st.floats(-8.0, 8.0)),
    channels=st.sampled_from([1, 3, 4]),
)
def test_a_warp_without_rotation_or_shear_samples_as_the_projective_kernel(
    height, width, out, scale, shift, channels
):
    # The scale-and-shift path (crop_and_resize of a framed image) must give the kernel's
    # values, the blend with the fill at the image's edges included.
    image = tf.constant(
        np.random.default_rng(height * 100 + width).uniform(0, 255, (height, width, channels)),
        tf.float32,
    )
    matrix = transform.translate_matrix(*shift) @ transform.scale_matrix(*scale)
    got = transform.warp(image, matrix, 114.0, interpolation="BILINEAR", output_size=out)
    want = _projective(image, matrix, 114.0, out)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=2e-3)
    # With a rotation the projective kernel runs: the same values exactly.
    turned = matrix @ transform.affine_matrix([[0.8, 0.6, 0.0], [-0.6, 0.8, 0.0], [0, 0, 1]])
    np.testing.assert_array_equal(
        transform.warp(image, turned, 114.0, interpolation="BILINEAR", output_size=out).numpy(),
        _projective(image, turned, 114.0, out).numpy(),
    )
