"""Tests for the pad steps and pad_to_window.

Images encode their pixel coordinates (channel 0 = row + 1, channel 1 = column + 1, channel 2 = 1)
and pads use a black fill, so the canvas an op built can be read back from its output.
"""

import numpy as np
import pytest
import tensorflow as tf
from helpers import check_placed, coord_examples, coord_features, over_seeds, seeds, unknown_spec
from hypothesis import given
from hypothesis import strategies as st

from object_input import fields
from object_input.ops import (
    ConfigError,
    get_step,
    pad_to_window,
    random_absolute_pad_image,
    random_crop_pad_image,
    random_pad_image,
    random_pad_to_aspect_ratio,
)
from object_input.ops.pad import fill_color

NAN = float("nan")
BLACK = (0.0, 0.0, 0.0)

# Surviving boxes must keep their ids, for every test here.
pytestmark = pytest.mark.usefixtures("box_id")

_examples = coord_examples(3, 16)


# --- pad_to_window and fill colours --------------------------------------------------------


def test_pad_to_window_exact():
    features = coord_features(2, 3, [[0.0, 0.0, 0.5, 1.0]], dtype=np.uint8)
    out = pad_to_window(features, 1, 2, 4, 6, pad_color=(10, 20, 30))
    image = out[fields.IMAGE].numpy()
    assert image.dtype == np.uint8 and image.shape == (4, 6, 3)
    np.testing.assert_array_equal(image[1:3, 2:5, 0], [[1, 1, 1], [2, 2, 2]])
    np.testing.assert_array_equal(image[0, 0], [10, 20, 30])
    np.testing.assert_array_equal(image[3, 5], [10, 20, 30])
    np.testing.assert_array_equal(image[1, 5], [10, 20, 30])
    # Box rows 0-1 of 2 → canvas rows 1-2 of 4; columns 0-3 of 3 → 2-5 of 6.
    np.testing.assert_allclose(out[fields.BOXES], [[0.25, 1 / 3, 0.5, 5 / 6]], atol=1e-6)
    np.testing.assert_array_equal(out[fields.MASKS][0, 1], [0, 0, 1, 1, 1, 0])
    np.testing.assert_array_equal(out[fields.MASKS][0, 2], [0] * 6)
    np.testing.assert_allclose(out[fields.KEYPOINTS][0], [[0.375, 7 / 12], [0.25, 1 / 3]])
    np.testing.assert_array_equal(out[fields.IMAGE_SHAPE], [4, 6])


def test_pad_to_window_keeps_boxes_outside_the_image_unclipped():
    features = coord_features(4, 4, [[-0.5, 0.5, 0.25, 1.5]])
    out = pad_to_window(features, 0, 0, 8, 8, pad_color=BLACK)
    np.testing.assert_allclose(out[fields.BOXES], [[-0.25, 0.25, 0.125, 0.75]])
    np.testing.assert_array_equal(out["box_id"], [100])


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_fill_color_default_mean_any_channel_count(channels):
    image = np.arange(2 * 2 * channels, dtype=np.uint8).reshape(2, 2, channels) * 10
    color = fill_color(tf.constant(image), None)
    assert color.dtype == tf.uint8
    np.testing.assert_array_equal(color, np.round(image.reshape(-1, channels).mean(0)))
    as_float = fill_color(tf.constant(image.astype(np.float32)), None)
    np.testing.assert_allclose(as_float, image.reshape(-1, channels).mean(0))
    np.testing.assert_array_equal(fill_color(tf.constant(image), (7,)), [7] * channels)
    features = {fields.IMAGE: tf.constant(image)}
    padded = pad_to_window(features, 0, 0, 3, 3)[fields.IMAGE].numpy()
    np.testing.assert_array_equal(padded[2, 2], np.round(image.reshape(-1, channels).mean(0)))


def test_fill_color_rejects_wrong_length():
    with pytest.raises(ValueError, match="2 values but the image has 3 channels"):
        fill_color(tf.zeros([2, 2, 3]), (1.0, 2.0))
    # Saturates rather than wrapping for uint8.
    np.testing.assert_array_equal(
        fill_color(tf.zeros([1, 1, 2], tf.uint8), (300.0, -4.0)), [255, 0]
    )


# --- random_pad_image / random_absolute_pad_image ------------------------------------------


@given(_examples, seeds, st.booleans())
def test_random_pad_image_properties(features, seed, center):
    height, width = features[fields.IMAGE].shape[:2]
    out = random_pad_image(features, seed=seed, pad_color=BLACK, center_pad=center)
    canvas_h, canvas_w = out[fields.IMAGE].shape[:2]
    assert height <= canvas_h < 2 * height
    assert width <= canvas_w < 2 * width
    region, (i0, j0) = check_placed(features, out, cropped=False)
    assert region == (0, 0, height, width)
    if center:
        assert (i0, j0) == ((canvas_h - height) // 2, (canvas_w - width) // 2)
    again = random_pad_image(features, seed=seed, pad_color=BLACK, center_pad=center)
    np.testing.assert_array_equal(again[fields.IMAGE], out[fields.IMAGE])


def test_random_pad_image_explicit_sizes_and_offsets():
    features = coord_features(4, 5, [[0.0, 0.0, 1.0, 1.0]])
    sizes, offsets = set(), set()
    for seed in range(80):
        out = random_pad_image(
            features, seed=seed, min_image_size=(6, 5), max_image_size=(8, 5), pad_color=BLACK
        )
        sizes.add(tuple(out[fields.IMAGE].shape[:2]))
        offsets.add(check_placed(features, out, cropped=False)[1])
    assert sizes == {(6, 5), (7, 5)}  # [min, max) per dimension
    assert offsets == {(i, 0) for i in range(4)}  # every offset up to flush with the bottom
    # A minimum below the image size never crops.
    out = random_pad_image(features, seed=1, min_image_size=(1, 1), max_image_size=(2, 2))
    assert out[fields.IMAGE].shape[:2] == [4, 5]
    with pytest.raises(ValueError, match="exceeds"):
        random_pad_image(features, min_image_size=(9, 9), max_image_size=(8, 9))


def test_random_absolute_pad_image_padding_range():
    features = coord_features(6, 4, [[0.1, 0.1, 0.9, 0.9]])

    def padding(seed):
        out = random_absolute_pad_image(
            features, seed=seed, max_height_padding=3, max_width_padding=1
        )
        return tf.shape(out[fields.IMAGE])[:2] - [6, 4]

    pads = over_seeds(padding, salt=5, num=300).numpy()
    assert set(pads[:, 0]) == {0, 1, 2} and set(pads[:, 1]) == {0}
    counts = np.bincount(pads[:, 0]) / 300
    assert np.abs(counts - 1 / 3).max() < 0.11  # 4 binomial standard deviations
    out = random_absolute_pad_image(
        features, seed=2, max_height_padding=3, max_width_padding=3, pad_color=BLACK
    )
    check_placed(features, out, cropped=False)


@given(_examples, seeds, st.integers(0, 6), st.integers(0, 6))
def test_random_absolute_pad_image_properties(features, seed, max_rows, max_cols):
    height, width = features[fields.IMAGE].shape[:2]
    out = random_absolute_pad_image(
        features,
        seed=seed,
        max_height_padding=max_rows,
        max_width_padding=max_cols,
        pad_color=BLACK,
    )
    canvas_h, canvas_w = out[fields.IMAGE].shape[:2]
    assert canvas_h - height < max(max_rows, 1) and canvas_w - width < max(max_cols, 1)
    region, _ = check_placed(features, out, cropped=False)
    assert region == (0, 0, height, width)


# --- random_crop_pad_image -----------------------------------------------------------------


def test_random_crop_pad_image_forced():
    # A whole-image crop (area 1, the image's own aspect), then a pad to exactly 1.5× the size.
    features = coord_features(8, 10, [[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0]])
    out = random_crop_pad_image(
        features,
        seed=4,
        min_object_covered=0.0,
        aspect_ratio_range=(1.25, 1.25),
        area_range=(1.0, 1.0),
        min_padded_size_ratio=(1.5, 1.5),
        max_padded_size_ratio=(1.5, 1.5),
        pad_color=BLACK,
    )
    assert out[fields.IMAGE].shape == [12, 15, 3]
    region, _ = check_placed(features, out, cropped=False)
    assert region == (0, 0, 8, 10)
    heights = {
        random_crop_pad_image(
            features,
            seed=seed,
            min_object_covered=0.0,
            aspect_ratio_range=(1.25, 1.25),
            area_range=(1.0, 1.0),
            max_padded_size_ratio=(1.5, 1.5),
        )[fields.IMAGE].shape[0]
        for seed in range(40)
    }
    assert heights == {8, 9, 10, 11}  # [1, 1.5) × the original height


@given(_examples, seeds, st.floats(0.0, 1.0), st.booleans())
def test_random_crop_pad_image_properties(features, seed, thresh, clip):
    height, width = features[fields.IMAGE].shape[:2]
    out = random_crop_pad_image(
        features,
        seed=seed,
        min_object_covered=0.0,
        aspect_ratio_range=(0.5, 2.0),
        overlap_thresh=thresh,
        clip_boxes=clip,
        min_padded_size_ratio=(0.5, 1.0),
        max_padded_size_ratio=(2.0, 1.5),
        pad_color=BLACK,
    )
    (_, _, crop_h, crop_w), _ = check_placed(features, out, thresh=thresh, clip=clip)
    canvas_h, canvas_w = out[fields.IMAGE].shape[:2]
    assert max(crop_h, int(0.5 * height)) <= canvas_h <= max(crop_h, 2 * height)
    assert max(crop_w, width) <= canvas_w <= max(crop_w, int(1.5 * width))


# --- random_pad_to_aspect_ratio ------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "ratio", "expected"),
    [
        ((10, 20), 1.0, (20, 20)),
        ((20, 10), 1.0, (20, 20)),
        ((10, 10), 2.0, (10, 20)),
        ((9, 12), 0.5, (24, 12)),
    ],
)
def test_random_pad_to_aspect_ratio_minimal(shape, ratio, expected):
    features = coord_features(*shape, [[0.2, 0.2, 0.6, 0.6]])
    out = random_pad_to_aspect_ratio(
        features, seed=1, aspect_ratio=ratio, max_padded_size_ratio=(1.0, 1.0)
    )
    assert tuple(out[fields.IMAGE].shape[:2]) == expected
    region, offset = check_placed(features, out, cropped=False)  # zero fill is black here
    assert region == (0, 0, *shape) and offset == (0, 0)


@given(_examples, seeds, st.floats(0.25, 4.0))
def test_random_pad_to_aspect_ratio_properties(features, seed, ratio):
    height, width = features[fields.IMAGE].shape[:2]
    out = random_pad_to_aspect_ratio(features, seed=seed, aspect_ratio=ratio)
    canvas_h, canvas_w = out[fields.IMAGE].shape[:2]
    assert abs(canvas_w / canvas_h - ratio) <= max(1.0, ratio) / min(canvas_h, canvas_w) + 1e-6
    # The canvas never shrinks a side and stays within 2× a side where the ratio allows.
    assert canvas_h >= height and canvas_w >= width
    base_h, base_w = max(height, width / ratio), max(width, height * ratio)
    scale = min(max(2 * height, base_h) / base_h, max(2 * width, base_w) / base_w)
    assert canvas_h <= round(scale * base_h) + 1 and canvas_w <= round(scale * base_w) + 1
    region, offset = check_placed(features, out, cropped=False)
    assert region == (0, 0, height, width) and offset == (0, 0)


# --- graph mode and validation -------------------------------------------------------------


def test_pad_ops_in_dataset_with_unknown_shapes():
    features = coord_features(6, 9, [[0.1, 0.2, 0.7, 0.9]], dtype=np.uint8)

    def augment(f):
        seed = tf.constant([3, 4])
        f = random_pad_image(f, seed=seed, pad_color=BLACK)
        f = random_absolute_pad_image(f, seed=seed + 1, max_height_padding=4, max_width_padding=4)
        return random_pad_to_aspect_ratio(f, seed=seed + 2, aspect_ratio=1.5)

    graph = tf.function(augment, input_signature=[unknown_spec(features)])
    dataset = tf.data.Dataset.from_tensors(features).map(augment)
    out = next(iter(dataset))
    assert out[fields.IMAGE].dtype == tf.uint8
    for name, value in graph(features).items():
        np.testing.assert_array_equal(value, out[name])
    np.testing.assert_array_equal(out["box_id"], [100])


@pytest.mark.parametrize(
    ("step", "params", "name"),
    [
        ("random_pad_image", {"min_image_size": (0, 4)}, "min_image_size"),
        ("random_pad_image", {"max_image_size": (4,)}, "max_image_size"),
        ("random_pad_image", {"pad_color": ()}, "pad_color"),
        ("random_pad_image", {"center_pad": "yes"}, "center_pad"),
        ("random_absolute_pad_image", {"max_height_padding": -1}, "max_height_padding"),
        ("random_absolute_pad_image", {"max_height_padding": 2}, "max_width_padding"),
        ("random_crop_pad_image", {"min_padded_size_ratio": (0.0, 1.0)}, "min_padded_size_ratio"),
        ("random_crop_pad_image", {"area_range": (0.0, 1.0)}, "area_range"),
        ("random_pad_to_aspect_ratio", {"aspect_ratio": -1.0}, "aspect_ratio"),
        ("random_pad_to_aspect_ratio", {"max_padded_size_ratio": (1.0, 0.0)}, "max_padded"),
    ],
)
def test_validation(step, params, name):
    with pytest.raises(ConfigError, match=rf"{step}.*{name}"):
        get_step(step).resolve(params)


def test_defaults_match_the_spec():
    assert get_step("random_pad_image").resolve({}) == {
        "min_image_size": None,
        "max_image_size": None,
        "pad_color": None,
        "center_pad": False,
    }
    assert get_step("random_absolute_pad_image").resolve(
        {"max_height_padding": 200, "max_width_padding": 200, "pad_color": [0, 0, 0]}
    ) == {"max_height_padding": 200, "max_width_padding": 200, "pad_color": (0.0, 0.0, 0.0)}
    crop_pad = get_step("random_crop_pad_image").resolve({})
    assert crop_pad["min_padded_size_ratio"] == (1.0, 1.0)
    assert crop_pad["max_padded_size_ratio"] == (2.0, 2.0)
    assert crop_pad["min_object_covered"] == 1.0 and crop_pad["pad_color"] is None
    assert get_step("random_pad_to_aspect_ratio").resolve({}) == {
        "aspect_ratio": 1.0,
        "min_padded_size_ratio": (1.0, 1.0),
        "max_padded_size_ratio": (2.0, 2.0),
    }
