"""Deferred decoding: cropping before decoding gives exactly the decode-then-crop result."""

import numpy as np
import pytest
import tensorflow as tf

from object_input import ExampleDecoder, fields
from object_input.decoders import deferred_image
from object_input.ops import Augmentation
from object_input.per_example import deferrable_prefix
from object_input.writers import build_example
from object_input.writers.synthetic import make_example

STEPS = [
    ("random_horizontal_flip", {"probability": 0.5}),
    ("random_vertical_flip", {"probability": 0.5}),
    ("random_crop_image", {"min_object_covered": 0.0, "area_range": (0.1, 0.6)}),
    ("random_adjust_brightness", {}),
]


def test_deferrable_prefix_ends_at_the_last_crop():
    names = ["random_horizontal_flip", "random_crop_image", "random_vertical_flip", "x"]
    assert deferrable_prefix(names) == 2
    assert deferrable_prefix(["random_horizontal_flip", "random_adjust_hue"]) == 0
    assert deferrable_prefix(["random_rotation90", "random_crop_image"]) == 0


@pytest.mark.parametrize(
    "image_format",
    [
        pytest.param("jpeg", marks=pytest.mark.slow),
        pytest.param("png", marks=pytest.mark.slow),
        "raw",
    ],
)
def test_deferred_equals_decode_then_augment(image_format):
    rng = np.random.default_rng(5)
    arrays = make_example(rng, 64, 80, max_objects=4, min_objects=2, image_format=image_format)
    serialized = build_example(arrays.pop("image"), **arrays).SerializeToString()
    decoder = ExampleDecoder(masks="png")
    augment = Augmentation(STEPS)

    @tf.function
    def both(seed):
        eager = augment(decoder(serialized), seed)
        lazy = decoder(serialized, defer_image=True)
        assert deferred_image.is_deferred(lazy)
        lazy = deferred_image.realize(augment(lazy, seed, stop=3), channels=3)
        return eager, augment(lazy, seed, start=3)

    sizes = set()
    for seed in range(12):
        eager, lazy = both(tf.constant([seed, 1]))
        assert set(eager) == set(lazy)
        for key in eager:
            np.testing.assert_array_equal(eager[key], lazy[key], err_msg=f"{key} seed {seed}")
        sizes.add(tuple(eager[fields.IMAGE].shape))
    assert len(sizes) > 3  # the crops really differ from seed to seed


def test_deferred_size_comes_from_the_header():
    image = np.zeros((37, 53, 3), np.uint8)
    for image_format in ("jpeg", "png"):
        serialized = build_example(image, image_format=image_format).SerializeToString()
        out = ExampleDecoder()(serialized, defer_image=True)
        assert out[fields.IMAGE].shape == (37, 53, 0)
        np.testing.assert_array_equal(out[fields.IMAGE_VIEW], [0, 0, 0, 0, 37, 53])


def test_rotation_refuses_a_deferred_image():
    serialized = build_example(np.zeros((4, 6, 3), np.uint8)).SerializeToString()
    lazy = ExampleDecoder()(serialized, defer_image=True)
    from object_input.ops import rotate90

    with pytest.raises(ValueError, match="deferred"):
        rotate90(lazy)


def test_dct_ratio_is_the_largest_that_still_covers_the_output():
    sides = tf.constant([100, 199, 200, 399, 400, 800, 2000])
    got = deferred_image.dct_ratio(sides, tf.constant(2000), (100, 100))
    np.testing.assert_array_equal(got, [1, 1, 2, 2, 4, 8, 8])
    np.testing.assert_array_equal(
        deferred_image.dct_ratio(tf.constant(800), tf.constant(150), (100, 100)), 1
    )


@pytest.mark.parametrize(
    ("window", "min_size", "ratio"),
    [
        ((0, 0, 96, 128), (40, 60), 2),
        ((8, 16, 64, 96), (16, 20), 4),
        ((0, 0, 96, 128), (12, 16), 8),
        ((5, 7, 60, 70), (40, 40), 1),
    ],
)
def test_dct_scaled_window_is_the_scaled_decode_of_that_window(window, min_size, ratio):
    rng = np.random.default_rng(2)
    pixels = tf.image.resize(rng.uniform(0, 255, (12, 16, 3)), (96, 128)).numpy().astype(np.uint8)
    encoded = tf.io.encode_jpeg(pixels, quality=90)
    top, left, height, width = window
    features = deferred_image.defer({}, encoded, 96, 128)
    features[fields.IMAGE] = tf.zeros([height, width, 0], tf.uint8)
    features[fields.IMAGE_VIEW] = tf.constant([top, left, 0, 0, 96, 128])
    image = deferred_image.realize(features, 3, dct_min_size=min_size)[fields.IMAGE].numpy()
    scaled = tf.io.decode_jpeg(encoded, ratio=ratio).numpy()
    expected = scaled[
        round(top / ratio) : round((top + height) / ratio),
        round(left / ratio) : round((left + width) / ratio),
    ]
    np.testing.assert_array_equal(image, expected)
    exact = deferred_image.realize(features, 3)[fields.IMAGE]
    np.testing.assert_array_equal(
        exact, tf.io.decode_jpeg(encoded)[top : top + height, left : left + width]
    )
