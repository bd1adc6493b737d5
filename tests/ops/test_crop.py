"""Tests for the crop steps and crop_to_window, the machinery every crop and pad step shares.

Images here encode their own pixel coordinates (channel 0 = row + 1, channel 1 = column + 1,
channel 2 = 1), so the window an op cut can be read back from its output and every other field
checked against a NumPy reference of that window.
"""

import numpy as np
import pytest
import tensorflow as tf
from helpers import (
    check_placed,
    coord_examples,
    coord_features,
    coord_image,
    infer_window,
    over_seeds,
    seeded_graph,
    seeds,
)
from hypothesis import assume, given
from hypothesis import strategies as st

from object_input import fields
from object_input.ops import (
    ConfigError,
    crop_to_window,
    get_step,
    random_crop_image,
    random_crop_to_aspect_ratio,
    random_crop_to_size,
    random_scale_crop_and_pad_to_square,
    random_square_crop_by_scale,
)

NAN = float("nan")

# Surviving boxes must keep their ids, for every test here.
pytestmark = pytest.mark.usefixtures("box_id")

_examples = coord_examples(4, 20)


# --- crop_to_window ------------------------------------------------------------------------


def test_crop_to_window_exact():
    features = coord_features(4, 4, [[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0]])
    # Window rows 1-2, columns 1-3: normalized [0.25, 0.25, 0.75, 1.0].
    out = crop_to_window(features, 1, 1, 2, 3, overlap_thresh=0.2, clip_boxes=True)
    np.testing.assert_array_equal(out[fields.IMAGE][..., 0], [[2, 2, 2], [3, 3, 3]])
    np.testing.assert_array_equal(out[fields.IMAGE][..., 1], [[2, 3, 4], [2, 3, 4]])
    # First box: 1/4 of it inside, re-framed to [-0.5, -1/3, 0.5, 1/3] then clipped.
    np.testing.assert_allclose(
        out[fields.BOXES], [[0.0, 0.0, 0.5, 1 / 3], [0.5, 1 / 3, 1.0, 1.0]], atol=1e-6
    )
    np.testing.assert_array_equal(out["box_id"], [100, 101])
    np.testing.assert_array_equal(out[fields.IMAGE_SHAPE], [2, 3])
    np.testing.assert_allclose(out[fields.KEYPOINTS][0], [[0.0, 0.0], [NAN, NAN]], atol=1e-6)
    np.testing.assert_array_equal(out[fields.KEYPOINT_VISIBILITIES], [[True, False], [True, True]])
    stricter = crop_to_window(features, 1, 1, 2, 3, overlap_thresh=0.3, clip_boxes=False)
    np.testing.assert_array_equal(stricter["box_id"], [101])
    np.testing.assert_allclose(stricter[fields.BOXES], [[0.5, 1 / 3, 1.5, 1.0]], atol=1e-6)
    assert stricter[fields.MASKS].shape == [1, 2, 3]


def test_crop_to_window_beyond_the_image_fills():
    features = coord_features(2, 2, [[0.0, 0.0, 1.0, 1.0]], dtype=np.uint8)
    fill = tf.constant([7, 8, 9], tf.uint8)
    out = crop_to_window(features, -1, 1, 4, 2, fill=fill, clip_boxes=False)
    image = out[fields.IMAGE].numpy()
    assert image.dtype == np.uint8
    np.testing.assert_array_equal(image[0], [[7, 8, 9], [7, 8, 9]])
    np.testing.assert_array_equal(image[1:3, 0], [[1, 2, 1], [2, 2, 1]])
    np.testing.assert_array_equal(image[1:3, 1], [[7, 8, 9], [7, 8, 9]])
    np.testing.assert_array_equal(out[fields.MASKS][0], [[0, 0], [1, 0], [1, 0], [0, 0]])
    np.testing.assert_allclose(out[fields.BOXES], [[0.25, -0.5, 0.75, 0.5]], atol=1e-6)
    np.testing.assert_allclose(out[fields.KEYPOINTS][0], [[0.5, 0.0], [NAN, NAN]], atol=1e-6)
    # A window that misses the image entirely is all fill.
    away = crop_to_window(features, 5, 5, 2, 3, fill=fill, overlap_thresh=0.0)
    np.testing.assert_array_equal(away[fields.IMAGE], np.broadcast_to([7, 8, 9], [2, 3, 3]))
    assert away[fields.BOXES].shape == [0, 4]


# --- random_crop_image ---------------------------------------------------------------------


@given(
    _examples,
    seeds,
    st.sampled_from([0.0, 0.5, 1.0]),
    st.floats(0.0, 1.0),
    st.booleans(),
)
def test_random_crop_image_properties(features, seed, covered, thresh, clip):
    params = dict(
        min_object_covered=covered,
        aspect_ratio_range=(0.5, 2.0),
        area_range=(0.1, 1.0),
        overlap_thresh=thresh,
        clip_boxes=clip,
    )
    out = random_crop_image(features, seed=seed, **params)
    window = infer_window(out[fields.IMAGE])
    height, width = features[fields.IMAGE].shape[:2]
    top, left, win_h, win_w = window
    assert top >= 0 and top + win_h <= height and left >= 0 and left + win_w <= width
    check_placed(features, out, window=window, thresh=thresh, clip=clip)
    if clip:
        got = out[fields.BOXES].numpy()
        assert ((got >= 0) & (got <= 1)).all()
    again = random_crop_image(features, seed=seed, **params)
    np.testing.assert_array_equal(again[fields.IMAGE], out[fields.IMAGE])


@pytest.mark.parametrize("seed", range(8))
def test_random_crop_image_covers_the_box_when_asked(seed):
    # One box on pixels 2..5 of an 8 × 8 image; min_object_covered=1 keeps it whole.
    features = coord_features(8, 8, [[0.25, 0.25, 0.75, 0.75]])
    out = random_crop_image(
        features, seed=seed, min_object_covered=1.0, area_range=(0.1, 0.6), overlap_thresh=1.0
    )
    top, left, height, width = infer_window(out[fields.IMAGE])
    assert top <= 2 and left <= 2 and top + height >= 6 and left + width >= 6
    assert height * width <= 0.6 * 64 + 8  # a real crop, within pixel rounding
    np.testing.assert_array_equal(out["box_id"], [100])


@pytest.mark.parametrize("with_field", [True, False])
def test_random_crop_image_without_boxes_keeps_the_whole_image(with_field):
    features = {fields.IMAGE: tf.constant(coord_image(6, 9))}
    if with_field:
        features[fields.BOXES] = tf.zeros([0, 4])
        features[fields.CLASSES] = tf.zeros([0], tf.int32)
    for seed in range(5):
        out = random_crop_image(features, seed=seed)
        np.testing.assert_array_equal(out[fields.IMAGE], features[fields.IMAGE])
        if with_field:
            assert out[fields.BOXES].shape == [0, 4]
    # With a lower coverage the image itself is cropped.
    small = random_crop_image(features, seed=0, min_object_covered=0.0, area_range=(0.1, 0.3))
    assert np.prod(small[fields.IMAGE].shape[:2]) < 54


def test_random_crop_image_random_coef_rate():
    features = coord_features(16, 16, [[0.2, 0.2, 0.6, 0.6]])
    image = features[fields.IMAGE]

    def unchanged(seed):
        out = random_crop_image(
            features, seed=seed, min_object_covered=0.0, area_range=(0.1, 0.5), random_coef=0.3
        )
        return tf.reduce_all(tf.shape(out[fields.IMAGE]) == tf.shape(image))

    rate = over_seeds(unchanged, salt=17).numpy().mean()
    assert abs(rate - 0.3) < 0.09  # 4 binomial standard deviations at n = 400
    # random_coef = 1 returns the input itself, every field included.
    out = random_crop_image(features, seed=3, random_coef=1.0, min_object_covered=0.0)
    for name, value in features.items():
        np.testing.assert_array_equal(out[name], value)
    np.testing.assert_array_equal(out[fields.IMAGE_SHAPE], [16, 16])


def test_random_crop_image_in_graph_and_dataset():
    features = coord_features(12, 10, [[0.1, 0.1, 0.5, 0.5], [0.4, 0.3, 0.9, 1.0]])
    params = dict(min_object_covered=0.0, area_range=(0.2, 0.8), random_coef=0.5)
    graph_op = seeded_graph(random_crop_image, features, **params)
    for seed in ([0, 1], [5, 9], [7, 3], [2, 2]):
        expected = random_crop_image(features, seed=seed, **params)
        got = graph_op(features, tf.constant(seed))
        for name in expected:
            np.testing.assert_array_equal(got[name], expected[name])
    dataset = tf.data.Dataset.from_tensors(features).map(
        lambda f: random_crop_image(f, seed=tf.constant([1, 2]), **params)
    )
    out = next(iter(dataset))
    check_placed(features, out, window=infer_window(out[fields.IMAGE]), thresh=0.3, clip=True)


# --- random_crop_to_aspect_ratio -----------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "ratio", "size"),
    [
        ((10, 20), 1.0, (10, 10)),
        ((20, 10), 1.0, (10, 10)),
        ((10, 20), 0.5, (10, 5)),
        ((9, 9), 2.0, (4, 9)),
        ((6, 8), 4 / 3, (6, 8)),
    ],
)
def test_random_crop_to_aspect_ratio_size_and_center(shape, ratio, size):
    features = coord_features(*shape, [[0.0, 0.0, 1.0, 1.0]])
    out = random_crop_to_aspect_ratio(features, aspect_ratio=ratio, center_crop=True)
    top, left, height, width = infer_window(out[fields.IMAGE])
    assert (height, width) == size
    assert (top, left) == ((shape[0] - height) // 2, (shape[1] - width) // 2)


@given(_examples, seeds, st.floats(0.3, 3.0), st.floats(0.0, 1.0), st.booleans())
def test_random_crop_to_aspect_ratio_properties(features, seed, ratio, thresh, clip):
    out = random_crop_to_aspect_ratio(
        features, seed=seed, aspect_ratio=ratio, overlap_thresh=thresh, clip_boxes=clip
    )
    window = infer_window(out[fields.IMAGE])
    height, width = features[fields.IMAGE].shape[:2]
    top, left, win_h, win_w = window
    assert win_h == height or win_w == width  # the largest window: one side whole
    assert abs(win_w / win_h - ratio) <= max(1.0, ratio) / min(win_h, win_w) + 1e-6
    assert 0 <= top <= height - win_h and 0 <= left <= width - win_w
    check_placed(features, out, window=window, thresh=thresh, clip=clip)


@pytest.mark.parametrize(
    ("shape", "window"),
    [((32, 32), (4, 4, 24, 24)), ((9, 7), (1, 0, 6, 7)), ((4, 3), (-1, -2, 6, 7))],
)
def test_random_crop_to_size_centre(shape, window):
    features = coord_features(*shape, [[0.1, 0.1, 0.9, 0.6]])
    out = random_crop_to_size(features, height=window[2], width=window[3], center_crop=True)
    assert infer_window(out[fields.IMAGE]) == window
    check_placed(features, out, window=window, thresh=0.3, clip=True)


@given(_examples, seeds, st.integers(1, 24), st.integers(1, 24), st.floats(0.0, 1.0))
def test_random_crop_to_size_properties(features, seed, crop_h, crop_w, thresh):
    out = random_crop_to_size(
        features, seed=seed, height=crop_h, width=crop_w, overlap_thresh=thresh
    )
    assert out[fields.IMAGE].shape[:2] == (crop_h, crop_w)
    top, left, _, _ = window = infer_window(out[fields.IMAGE])
    height, width = features[fields.IMAGE].shape[:2]
    # Inside the image when it is larger; the whole image inside the window when smaller.
    assert min(0, height - crop_h) <= top <= max(0, height - crop_h)
    assert min(0, width - crop_w) <= left <= max(0, width - crop_w)
    check_placed(features, out, window=window, thresh=thresh, clip=True)


def test_random_crop_to_size_offsets_cover_the_range():
    image = tf.constant(coord_image(6, 5))

    def offsets(seed):
        out = random_crop_to_size({fields.IMAGE: image}, seed=seed, height=4, width=7)[fields.IMAGE]
        # Source row shown by the first output row (1-based), and the zero columns left of it.
        left_pad = tf.reduce_sum(tf.cast(tf.cumsum(out[0, :, 2]) == 0, tf.int32))
        return tf.reduce_max(out[0, :, 0]), left_pad

    rows, pads = over_seeds(offsets, 5, num=300)
    assert sorted(set(rows.numpy().astype(int).tolist())) == [1, 2, 3]  # tops 0..2
    assert sorted(set(pads.numpy().tolist())) == [0, 1, 2]  # 5 columns placed at 0..2 of 7


def test_random_crop_to_aspect_ratio_offsets_cover_the_range():
    features = {fields.IMAGE: tf.constant(coord_image(4, 10))}
    lefts = {
        infer_window(random_crop_to_aspect_ratio(features, seed=s)[fields.IMAGE])[1]
        for s in range(60)
    }
    assert lefts == set(range(7))


# --- random_square_crop_by_scale -----------------------------------------------------------


@given(
    _examples,
    seeds,
    st.integers(0, 12),
    st.floats(0.3, 1.0),
    st.floats(1.0, 1.6),
    st.integers(1, 5),
)
def test_random_square_crop_by_scale_properties(features, seed, border, low, high, count):
    out = random_square_crop_by_scale(
        features, seed=seed, max_border=border, scale_min=low, scale_max=high, num_scales=count
    )
    if not (out[fields.IMAGE].numpy()[..., 2] == 1).any():
        # A small square centred on the image's last row or column lies wholly beyond it: the
        # output shows no content, so no box can survive.
        assert out[fields.IMAGE].shape[0] == out[fields.IMAGE].shape[1]
        assert out[fields.BOXES].shape[0] == 0
        return
    window = infer_window(out[fields.IMAGE])
    height, width = features[fields.IMAGE].shape[:2]
    top, left, side, side_x = window
    assert side == side_x
    sides = {
        max(int(np.floor(np.float32(s) * max(height, width))), 1)
        for s in np.linspace(low, high, count, dtype=np.float32)
    }
    assert min(abs(side - s) for s in sides) <= 1
    # The centre lies at least a (halved) border inside the image.
    centre_y = top + side // 2
    assert 0 <= centre_y <= height and 0 <= left + side // 2 <= width
    # Clipped, and boxes left without area are dropped: the crop rule with threshold 0.
    check_placed(features, out, window=window, thresh=0.0, clip=True)
    got = out[fields.BOXES].numpy()
    assert (got[:, 2] > got[:, 0]).all() and (got[:, 3] > got[:, 1]).all()


def test_random_square_crop_by_scale_exact():
    # Border 2 on a 10 × 10 image, scale 0.4: a 4 × 4 square centred in rows/columns [2, 8].
    features = coord_features(10, 10, [[0.0, 0.0, 0.2, 0.2], [0.4, 0.4, 0.6, 0.6]])
    centres = set()
    for seed in range(40):
        out = random_square_crop_by_scale(
            features, seed=seed, max_border=2, scale_min=0.4, scale_max=0.4, num_scales=1
        )
        top, left, height, width = infer_window(out[fields.IMAGE])
        assert (height, width) == (4, 4)
        centres.add((top + 2, left + 2))
    assert {c for pair in centres for c in pair} == set(range(2, 9))
    # A border larger than half the image is halved until it fits (12 → 6 → 3 on 8 pixels).
    small = coord_features(8, 8, [])
    tops = {
        infer_window(
            random_square_crop_by_scale(small, seed=s, max_border=12, scale_min=0.5, scale_max=0.5)[
                fields.IMAGE
            ]
        )[0]
        + 2
        for s in range(40)
    }
    assert tops == set(range(3, 6))


# --- random_scale_crop_and_pad_to_square ---------------------------------------------------


def test_random_scale_crop_and_pad_to_square_exact():
    features = coord_features(20, 10, [[0.0, 0.0, 1.0, 1.0], [0.5, 0.5, 1.0, 1.0]])
    # Scale 1: the longer side becomes 10, so the image is 10 × 5 and the right half is zero.
    out = random_scale_crop_and_pad_to_square(
        features, seed=1, output_size=10, scale_min=1.0, scale_max=1.0
    )
    image = out[fields.IMAGE].numpy()
    assert image.shape == (10, 10, 3) and image.dtype == np.float32
    assert (image[:, 5:] == 0).all()
    np.testing.assert_allclose(image[:, :5, 2], 1.0, atol=1e-5)
    np.testing.assert_allclose(out[fields.BOXES], [[0, 0, 1, 0.5], [0.5, 0.25, 1, 0.5]], atol=1e-6)
    assert out[fields.MASKS].shape == [2, 10, 10]
    assert (out[fields.MASKS].numpy()[:, :, 5:] == 0).all()
    assert out[fields.MASKS].numpy()[0, :, :5].all()


@given(_examples, seeds)
def test_random_scale_crop_and_pad_to_square_unit_scale_is_a_window(features, seed):
    # With the longer side resized to exactly output_size · 2 = its own length (no resampling),
    # the op is a crop-and-pad window of the original, checked against the reference.
    longest = max(features[fields.IMAGE].shape[:2])
    assume(longest % 2 == 0)
    out = random_scale_crop_and_pad_to_square(
        features, seed=seed, output_size=longest // 2, scale_min=2.0, scale_max=2.0
    )
    window = infer_window(out[fields.IMAGE])
    assert window[2:] == (longest // 2, longest // 2)
    check_placed(features, out, window=window, thresh=0.0, clip=True)


def test_random_scale_crop_and_pad_to_square_static_shape_in_graph():
    features = coord_features(12, 7, [[0.1, 0.1, 0.9, 0.9]])
    fn = seeded_graph(random_scale_crop_and_pad_to_square, features, output_size=8)
    out = fn(features, tf.constant([4, 0]))
    assert fn.get_concrete_function().structured_outputs[fields.IMAGE].shape == [8, 8, None]
    assert out[fields.IMAGE].shape == [8, 8, 3]
    got = out[fields.BOXES].numpy()
    assert ((got >= 0) & (got <= 1)).all()


# --- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "params", "name"),
    [
        ("random_crop_image", {"min_object_covered": 1.5}, "min_object_covered"),
        ("random_crop_image", {"aspect_ratio_range": (2.0, 1.0)}, "aspect_ratio_range"),
        ("random_crop_image", {"area_range": (0.1, 1.5)}, "area_range"),
        ("random_crop_image", {"overlap_thresh": -0.1}, "overlap_thresh"),
        ("random_crop_image", {"random_coef": 2}, "random_coef"),
        ("random_crop_image", {"clip_boxes": 1}, "clip_boxes"),
        ("random_crop_to_aspect_ratio", {"aspect_ratio": 0.0}, "aspect_ratio"),
        ("random_square_crop_by_scale", {"num_scales": 0}, "num_scales"),
        ("random_square_crop_by_scale", {"max_border": -1}, "max_border"),
        ("random_scale_crop_and_pad_to_square", {"output_size": 0}, "output_size"),
        ("random_scale_crop_and_pad_to_square", {"scale_min": 0.0}, "scale_min"),
    ],
)
def test_validation(step, params, name):
    with pytest.raises(ConfigError, match=rf"{step}.*{name}"):
        get_step(step).resolve(params)


def test_defaults_match_the_spec():
    assert get_step("random_crop_image").resolve({}) == {
        "min_object_covered": 1.0,
        "aspect_ratio_range": (0.75, 1.33),
        "area_range": (0.1, 1.0),
        "overlap_thresh": 0.3,
        "clip_boxes": True,
        "random_coef": 0.0,
    }
    assert get_step("random_square_crop_by_scale").resolve({}) == {
        "max_border": 128,
        "scale_min": 0.6,
        "scale_max": 1.3,
        "num_scales": 8,
    }
    assert get_step("random_scale_crop_and_pad_to_square").resolve({}) == {
        "output_size": 512,
        "scale_min": 0.1,
        "scale_max": 2.0,
    }
    assert get_step("random_crop_to_aspect_ratio").resolve({}) == {
        "aspect_ratio": 1.0,
        "overlap_thresh": 0.3,
        "clip_boxes": True,
        "center_crop": False,
    }
    with pytest.raises(ValueError, match="scale_min"):
        random_square_crop_by_scale(coord_features(4, 4, []), scale_min=2.0, scale_max=1.0)
