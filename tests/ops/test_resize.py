"""Tests for the resize family: resize_image, resize_to_range, resize_to_min_dimension,
random_resize_method, random_image_scale and random_downscale_to_target_pixels."""

import numpy as np
import pytest
import tensorflow as tf
from helpers import as_numpy, over_seeds, run_in_graph
from hypothesis import given
from hypothesis import strategies as st

from object_input import fields
from object_input.ops import (
    ConfigError,
    get_step,
    random_downscale_to_target_pixels,
    random_image_scale,
    random_resize_method,
    resize_image,
    resize_to_min_dimension,
    resize_to_range,
)
from object_input.ops.resize import METHODS, resize_features


def _example(height=4, width=6, channels=3, dtype=tf.uint8):
    pixels = (np.arange(height * width * channels) * 37 % 256).reshape(height, width, channels)
    mask = np.zeros([1, height, width], np.uint8)
    mask[0, : height // 2, : width // 2] = 1
    return {
        fields.IMAGE: tf.constant(pixels, dtype),
        fields.BOXES: tf.constant([[0.0, 0.0, 0.5, 0.5]]),
        fields.MASKS: tf.constant(mask),
        fields.KEYPOINTS: tf.constant([[[0.25, 0.25]]]),
        fields.CLASSES: tf.constant([2]),
    }


def _assert_annotations_unchanged(before, after):
    for key in (fields.BOXES, fields.KEYPOINTS, fields.CLASSES):
        np.testing.assert_array_equal(after[key], before[key])


def _assert_shapes(out, height, width):
    assert out[fields.IMAGE].shape[:2] == (height, width)
    np.testing.assert_array_equal(out[fields.IMAGE_SHAPE], [height, width])
    assert out[fields.MASKS].shape[1:] == (height, width)
    assert out[fields.MASKS].dtype == np.uint8
    assert set(np.unique(out[fields.MASKS])) <= {0, 1}


def test_resize_image_exact():
    features = _example(2, 2, 1)
    out = as_numpy(resize_image(features, new_height=4, new_width=6, method="NEAREST_NEIGHBOR"))
    pixels = features[fields.IMAGE].numpy()
    np.testing.assert_array_equal(out[fields.IMAGE], pixels.repeat(2, axis=0).repeat(3, axis=1))
    assert out[fields.IMAGE].dtype == np.uint8
    np.testing.assert_array_equal(out[fields.MASKS][0], [[1, 1, 1, 0, 0, 0]] * 2 + [[0] * 6] * 2)
    _assert_shapes(out, 4, 6)
    _assert_annotations_unchanged(as_numpy(features), out)
    bilinear = as_numpy(resize_image(features, new_height=3, new_width=5))
    assert bilinear[fields.IMAGE].dtype == np.float32
    _assert_shapes(bilinear, 3, 5)


@pytest.mark.parametrize(
    ("size", "min_dimension", "max_dimension", "expected"),
    [
        ((100, 200), 50, 200, (50, 100)),  # short side reaches min_dimension
        ((100, 400), 50, 120, (30, 120)),  # long side would pass max_dimension: capped instead
        ((10, 20), 30, 100, (30, 60)),  # upscaling
        ((400, 100), 50, 120, (120, 30)),  # portrait
        ((77, 77), 64, 64, (64, 64)),
    ],
)
def test_resize_to_range_sizes(size, min_dimension, max_dimension, expected):
    features = _example(*size)
    out = as_numpy(
        resize_to_range(features, min_dimension=min_dimension, max_dimension=max_dimension)
    )
    _assert_shapes(out, *expected)
    _assert_annotations_unchanged(as_numpy(features), out)


def test_resize_to_range_pad_to_max_dimension_exact():
    features = _example(10, 40)
    out = as_numpy(
        resize_to_range(
            features,
            min_dimension=5,
            max_dimension=12,
            pad_to_max_dimension=True,
            method="NEAREST_NEIGHBOR",
        )
    )
    _assert_shapes(out, 12, 12)
    content = resize_features(features, 3, 12, "NEAREST_NEIGHBOR")
    np.testing.assert_array_equal(out[fields.IMAGE][:3], content[fields.IMAGE])
    assert not out[fields.IMAGE][3:].any()
    np.testing.assert_array_equal(out[fields.MASKS][:, :3], content[fields.MASKS])
    assert not out[fields.MASKS][:, 3:].any()
    # Boxes and keypoints are re-framed to the padded image: y shrinks by 3 / 12.
    np.testing.assert_allclose(out[fields.BOXES], [[0.0, 0.0, 0.125, 0.5]], atol=1e-6)
    np.testing.assert_allclose(out[fields.KEYPOINTS], [[[0.0625, 0.25]]], atol=1e-6)


@given(
    st.integers(1, 60),
    st.integers(1, 60),
    st.integers(1, 40),
    st.integers(0, 40),
    st.booleans(),
)
def test_resize_to_range_properties(height, width, min_dimension, extra, pad):
    max_dimension = min_dimension + extra
    features = _example(height, width)
    out = as_numpy(
        resize_to_range(
            features,
            min_dimension=min_dimension,
            max_dimension=max_dimension,
            pad_to_max_dimension=pad,
        )
    )
    if pad:
        _assert_shapes(out, max_dimension, max_dimension)
        # Whatever the padding, boxes keep their size in pixels relative to the content.
        content = resize_to_range(
            features, min_dimension=min_dimension, max_dimension=max_dimension
        )
        new_height, new_width = content[fields.IMAGE].shape[:2]
        pixels = out[fields.BOXES] * max_dimension
        expected = content[fields.BOXES].numpy() * [new_height, new_width, new_height, new_width]
        np.testing.assert_allclose(pixels, expected, atol=1e-4)
        assert not out[fields.IMAGE][new_height:].any()
        assert not out[fields.IMAGE][:, new_width:].any()
    else:
        new_height, new_width = out[fields.IMAGE].shape[:2]
        _assert_shapes(out, new_height, new_width)
        _assert_annotations_unchanged(as_numpy(features), out)
    short, long = sorted((new_height, new_width))
    assert long <= max_dimension
    assert short == min_dimension or long == max_dimension
    # Aspect ratio kept up to rounding of each side (unless a side hit the 1-pixel floor).
    if short > 1:
        assert abs(new_height * width - new_width * height) <= 0.5 * (height + width) + 1e-6


def test_resize_to_min_dimension():
    features = _example(10, 20)
    out = as_numpy(resize_to_min_dimension(features, min_dimension=15))
    _assert_shapes(out, 15, 30)
    _assert_annotations_unchanged(as_numpy(features), out)
    large = as_numpy(resize_to_min_dimension(features, min_dimension=8))
    _assert_shapes(large, 10, 20)
    np.testing.assert_array_equal(large[fields.IMAGE], features[fields.IMAGE].numpy())
    np.testing.assert_array_equal(large[fields.MASKS], features[fields.MASKS].numpy())
    assert get_step("resize_to_min_dimension").resolve({})["min_dimension"] == 600


def test_random_image_scale_forced_ratio():
    features = _example(3, 5)
    out = as_numpy(random_image_scale(features, seed=1, min_scale_ratio=2.0, max_scale_ratio=2.0))
    _assert_shapes(out, 6, 10)
    mask = features[fields.MASKS].numpy()
    np.testing.assert_array_equal(out[fields.MASKS], mask.repeat(2, axis=1).repeat(2, axis=2))
    _assert_annotations_unchanged(as_numpy(features), out)


@given(st.integers(0, 2**31 - 1), st.integers(2, 30), st.integers(2, 30))
def test_random_image_scale_range(seed, height, width):
    features = _example(height, width)
    out = as_numpy(
        random_image_scale(features, seed=seed, min_scale_ratio=0.5, max_scale_ratio=1.5)
    )
    new_height, new_width = out[fields.IMAGE].shape[:2]
    _assert_shapes(out, new_height, new_width)
    assert round(height * 0.5) <= new_height <= round(height * 1.5)
    assert round(width * 0.5) <= new_width <= round(width * 1.5)
    # One ratio for both sides.
    assert abs(new_height / height - new_width / width) <= 0.5 / height + 0.5 / width + 1e-6
    again = random_image_scale(features, seed=seed, min_scale_ratio=0.5, max_scale_ratio=1.5)
    np.testing.assert_array_equal(again[fields.IMAGE], out[fields.IMAGE])


def test_random_resize_method_uses_all_methods_uniformly():
    features = _example(3, 4)
    del features[fields.KEYPOINTS]
    references = [
        tf.cast(resize_features(features, 5, 7, method)[fields.IMAGE], tf.float32).numpy()
        for method in METHODS
    ]
    # The four methods give four different images here, so each output names its method.
    for i in range(4):
        for j in range(i):
            assert not np.allclose(references[i], references[j])

    def resized(seed):
        out = random_resize_method(
            features,
            seed=seed,
            target_height=5,
            target_width=7,
        )
        return out[fields.IMAGE], out[fields.MASKS]

    images, masks = over_seeds(resized, salt=5)
    assert images.dtype == tf.float32
    counts = np.zeros(4, int)
    for image in images.numpy():
        matches = [np.allclose(image, reference, atol=1e-4) for reference in references]
        assert sum(matches) == 1
        counts[matches.index(True)] += 1
    # Binomial(400, 1/4) per method: mean 100, sd 8.7.
    assert (counts >= 60).all() and (counts <= 140).all(), counts
    expected_mask = resize_features(features, 5, 7, "NEAREST_NEIGHBOR")[fields.MASKS].numpy()
    for mask in masks.numpy():
        np.testing.assert_array_equal(mask, expected_mask)


def test_random_downscale_to_target_pixels_exact():
    features = _example(100, 100)
    out = as_numpy(
        random_downscale_to_target_pixels(
            features, seed=2, min_target_pixels=2500, max_target_pixels=2500
        )
    )
    _assert_shapes(out, 50, 50)
    _assert_annotations_unchanged(as_numpy(features), out)
    # Already small enough: the pixels stay, as float32.
    small = as_numpy(
        random_downscale_to_target_pixels(
            features, seed=2, min_target_pixels=20000, max_target_pixels=30000
        )
    )
    _assert_shapes(small, 100, 100)
    assert small[fields.IMAGE].dtype == np.float32
    np.testing.assert_array_equal(small[fields.IMAGE], features[fields.IMAGE].numpy())


@given(st.integers(0, 2**31 - 1))
def test_random_downscale_to_target_pixels_range(seed):
    features = _example(60, 90)
    out = as_numpy(
        random_downscale_to_target_pixels(
            features, seed=seed, min_target_pixels=1000, max_target_pixels=3000
        )
    )
    height, width = out[fields.IMAGE].shape[:2]
    _assert_shapes(out, height, width)
    assert 1000 * 0.9 <= height * width <= 3000 * 1.1
    assert abs(width / height - 1.5) < 0.1


def test_random_downscale_random_coef_rate():
    features = _example(40, 40)

    def kept(seed):
        out = random_downscale_to_target_pixels(
            features,
            seed=seed,
            min_target_pixels=400,
            max_target_pixels=400,
            random_coef=0.3,
        )
        return tf.shape(out[fields.IMAGE])[0] == 40

    hits = sum(over_seeds(kept, salt=9).numpy())
    # Binomial(400, 0.3): mean 120, sd 9.2.
    assert 79 <= hits <= 161, hits


@pytest.mark.parametrize(
    ("op", "params"),
    [
        (resize_image, {"new_height": 5, "new_width": 3}),
        (resize_to_range, {"min_dimension": 5, "max_dimension": 9, "pad_to_max_dimension": True}),
        (resize_to_min_dimension, {"min_dimension": 8}),
        (random_resize_method, {"target_height": 5, "target_width": 3}),
        (random_image_scale, {}),
        (random_downscale_to_target_pixels, {"min_target_pixels": 10, "max_target_pixels": 20}),
    ],
)
def test_graph_mode_matches_eager(op, params):
    features = _example(4, 6)
    eager = as_numpy(op(features, seed=[3, 4], **params))
    graph = as_numpy(run_in_graph(op, features, seed=tf.constant([3, 4]), **params))
    assert eager.keys() == graph.keys()
    for key in eager:
        np.testing.assert_allclose(graph[key], eager[key], atol=1e-4)


def test_images_without_masks_or_boxes():
    features = {fields.IMAGE: tf.zeros([4, 6, 5], tf.uint8)}
    for op, params in (
        (resize_to_range, {"min_dimension": 5, "max_dimension": 9, "pad_to_max_dimension": True}),
        (random_resize_method, {"target_height": 5, "target_width": 3}),
        (random_downscale_to_target_pixels, {"min_target_pixels": 10, "max_target_pixels": 20}),
    ):
        out = op(features, seed=None, **params)
        assert set(out) == {fields.IMAGE, fields.IMAGE_SHAPE}
        assert out[fields.IMAGE].shape[-1] == 5


@pytest.mark.parametrize(
    ("step", "params", "parameter"),
    [
        ("resize_to_range", {"min_dimension": 0, "max_dimension": 5}, "min_dimension"),
        ("resize_to_range", {"max_dimension": 5}, "min_dimension"),
        ("resize_to_range", {"min_dimension": 2, "max_dimension": 5, "method": "FOO"}, "method"),
        ("resize_to_min_dimension", {"min_dimension": -1}, "min_dimension"),
        ("random_resize_method", {"target_height": 0, "target_width": 3}, "target_height"),
        ("random_resize_method", {"target_height": 3}, "target_width"),
        ("random_image_scale", {"min_scale_ratio": 0.0}, "min_scale_ratio"),
        ("random_downscale_to_target_pixels", {"random_coef": 1.5}, "random_coef"),
        ("random_downscale_to_target_pixels", {"min_target_pixels": 0}, "min_target_pixels"),
    ],
)
def test_parameter_validation(step, params, parameter):
    with pytest.raises(ConfigError, match=rf"{step}.*{parameter}"):
        get_step(step).resolve(params)


def test_parameter_order_validation():
    features = _example()
    with pytest.raises(ConfigError, match=r"resize_to_range.*max_dimension"):
        resize_to_range(features, min_dimension=10, max_dimension=5)
    with pytest.raises(ConfigError, match=r"random_image_scale.*max_scale_ratio"):
        random_image_scale(features, min_scale_ratio=2.0, max_scale_ratio=1.0)
    with pytest.raises(ConfigError, match=r"random_downscale_to_target_pixels.*max_target_pixels"):
        random_downscale_to_target_pixels(features, min_target_pixels=5, max_target_pixels=4)


def test_pad_to_max_dimension_gives_a_static_shape():
    def resize(image, masks):
        features = {fields.IMAGE: image, fields.MASKS: masks}
        return resize_to_range(
            features, min_dimension=5, max_dimension=9, pad_to_max_dimension=True
        )

    traced = tf.function(resize).get_concrete_function(
        tf.TensorSpec([None, None, 3], tf.uint8), tf.TensorSpec([None, None, None], tf.uint8)
    )
    assert traced.structured_outputs[fields.IMAGE].shape.as_list() == [9, 9, 3]
    assert traced.structured_outputs[fields.MASKS].shape.as_list() == [None, 9, 9]


@given(
    size=st.tuples(st.integers(1, 40), st.integers(1, 40)),
    out=st.tuples(st.integers(1, 50), st.integers(1, 50)),
    channels=st.sampled_from([1, 3]),
)
def test_bilinear_on_uint8_is_tensorflows_bilinear_on_uint8_bit_for_bit(size, out, channels):
    # The op casts integer images to float32 before the bilinear kernel (faster); the values
    # must be exactly those of the kernel on the integers.
    rng = np.random.default_rng(sum(size) * 100 + sum(out))
    image = tf.constant(rng.integers(0, 256, (*size, channels)).astype(np.uint8))
    resized = resize_features({fields.IMAGE: image}, *out)[fields.IMAGE]
    assert resized.dtype == tf.float32
    np.testing.assert_array_equal(resized.numpy(), tf.image.resize(image, out).numpy())
