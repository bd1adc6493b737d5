"""random_rotation and random_affine: properties of the fields they move, and exact cases.

Examples have two boxes in the left and right halves; every pixel lying wholly inside box ``i``
is painted ``PAINT[i]`` and set in mask ``i``; keypoint ``i`` is box ``i``'s centre. With nearest
neighbour sampling a pixel of colour ``PAINT[i]`` comes from inside box ``i``, so it must lie in
the moved box; the pixel under a moved keypoint must still carry its box's colour.
"""

import numpy as np
import pytest
import tensorflow as tf
from helpers import as_numpy, coord_examples, seeds
from hypothesis import given, settings
from hypothesis import strategies as st

import object_input as oi
from object_input import fields
from object_input.ops import ConfigError, get_step, random_affine, random_rotation, rotate90
from object_input.ops._image_ops import about_centre, rotation
from object_input.ops.affine import mask_boxes, warp_example
from object_input.ops.resize import resize_features
from object_input.writers.synthetic import write_synthetic_dataset

PAINT = (80, 160)
EPS = 1e-4


@st.composite
def painted_examples(draw):
    height = draw(st.integers(16, 32))
    width = draw(st.integers(20, 36))
    boxes = []
    for half in (0, 1):
        x0 = draw(st.integers(half * width // 2, half * width // 2 + width // 2 - 7))
        x1 = draw(st.integers(x0 + 6, half * width // 2 + width // 2))
        y0 = draw(st.integers(0, height - 7))
        y1 = draw(st.integers(y0 + 6, height))
        boxes.append([y0, x0, y1, x1])
    return _example(height, width, boxes)


def _example(height, width, pixel_boxes):
    image = np.zeros([height, width, 3], np.uint8)
    masks = np.zeros([len(pixel_boxes), height, width], np.uint8)
    for i, (y0, x0, y1, x1) in enumerate(pixel_boxes):
        image[y0:y1, x0:x1, 0] = PAINT[i]
        masks[i, y0:y1, x0:x1] = 1
    scale = np.array([height, width, height, width], np.float32)
    boxes = np.array(pixel_boxes, np.float32) / scale
    centres = (boxes[:, :2] + boxes[:, 2:]) / 2
    return {
        fields.IMAGE: tf.constant(image),
        fields.BOXES: tf.constant(boxes),
        fields.CLASSES: tf.constant([1, 2]),
        fields.MASKS: tf.constant(masks),
        fields.KEYPOINTS: tf.constant(centres[:, None, :]),
        fields.KEYPOINT_VISIBILITIES: tf.ones([2, 1], tf.bool),
    }


affine_params = st.fixed_dictionaries(
    {
        "max_rotation": st.floats(0.0, 90.0),
        "max_shear": st.floats(0.0, 10.0),
        "max_translation": st.floats(0.0, 0.3),
        "scale_range": st.tuples(st.floats(0.7, 1.0), st.floats(1.0, 1.3)),
    }
)


def _pixel_centres(image, color):
    rows, cols = np.nonzero(image[..., 0] == color)
    return rows + 0.5, cols + 0.5


def _check_moved(features, out, tight):
    """Every property of a moved example (nearest neighbour, boxes_from_masks = ``tight``)."""
    height, width = out[fields.IMAGE].shape[:2]
    boxes = out[fields.BOXES]
    assert ((boxes >= 0) & (boxes <= 1)).all()
    assert (boxes[:, :2] <= boxes[:, 2:]).all()
    kept = [int(c) - 1 for c in out[fields.CLASSES]]
    assert kept == sorted(kept)
    assert len(out[fields.MASKS]) == len(out[fields.KEYPOINTS]) == len(kept)
    for position, index in enumerate(kept):
        ymin, xmin, ymax, xmax = boxes[position] * [height, width, height, width]
        rows, cols = _pixel_centres(out[fields.IMAGE], PAINT[index])
        # With tight boxes the whole pixel lies in the box, else at least its centre.
        margin = 0.5 if tight else 0.0
        assert (rows - margin >= ymin - EPS).all() and (rows + margin <= ymax + EPS).all()
        assert (cols - margin >= xmin - EPS).all() and (cols + margin <= xmax + EPS).all()
        point = out[fields.KEYPOINTS][position, 0]
        if not np.isnan(point).any():
            row, col = (point * [height, width]).astype(int)
            assert out[fields.IMAGE][min(row, height - 1), min(col, width - 1), 0] == PAINT[index]
    lost = np.isnan(out[fields.KEYPOINTS]).any(-1)
    np.testing.assert_array_equal(out[fields.KEYPOINT_VISIBILITIES], ~lost)


@settings(max_examples=25, deadline=None)
@given(features=painted_examples(), params=affine_params, seed=seeds, tight=st.booleans())
def test_random_affine_moves_every_field_with_the_pixels(features, params, seed, tight):
    out = as_numpy(
        random_affine(
            features, seed=seed, interpolation="NEAREST", boxes_from_masks=tight, **params
        )
    )
    _check_moved(as_numpy(features), out, tight)


@settings(max_examples=25, deadline=None)
@given(features=painted_examples(), angle=st.floats(0.0, 180.0), seed=seeds)
def test_rotated_masks_tight_boxes_lie_in_the_rotated_corner_boxes(features, angle, seed):
    hull = as_numpy(
        random_rotation(
            features, seed=seed, max_angle=angle, interpolation="NEAREST", boxes_from_masks=False
        )
    )
    _check_moved(as_numpy(features), hull, tight=False)
    tight, has_pixels = (t.numpy() for t in mask_boxes(tf.constant(hull[fields.MASKS])))
    height, width = hull[fields.IMAGE].shape[:2]
    half_pixel = 0.5 / np.array([height, width, height, width])
    grown = hull[fields.BOXES] + np.array([-1, -1, 1, 1]) * half_pixel
    inside = (tight[:, :2] >= grown[:, :2] - EPS).all(1) & (tight[:, 2:] <= grown[:, 2:] + EPS).all(
        1
    )
    assert inside[has_pixels].all()
    again = as_numpy(random_rotation(features, seed=seed, max_angle=angle, interpolation="NEAREST"))
    np.testing.assert_allclose(again[fields.BOXES][has_pixels], tight[has_pixels], atol=1e-6)


@settings(max_examples=10, deadline=None)
@given(features=painted_examples(), seed=seeds)
def test_identity_parameters_give_the_input(features, seed):
    for out in (
        random_affine(features, seed=seed),
        random_rotation(features, seed=seed, max_angle=0.0),
        random_rotation(features, seed=seed, probability=0.0),
    ):
        out = as_numpy(out)
        for name, value in as_numpy(features).items():
            np.testing.assert_allclose(out[name], value, atol=1e-6, err_msg=name)


def test_a_quarter_turn_equals_rotate90():
    features = _example(6, 6, [[0, 0, 2, 3], [3, 3, 6, 6]])
    matrix = about_centre(6, 6, rotation(90.0))
    out = as_numpy(
        warp_example(
            features, matrix, fill_value=0.0, interpolation="NEAREST", boxes_from_masks=False
        )
    )
    expected = as_numpy(rotate90(features, keypoint_rot_permutation=[0]))
    for name in (fields.IMAGE, fields.MASKS, fields.CLASSES, fields.KEYPOINT_VISIBILITIES):
        np.testing.assert_array_equal(out[name], expected[name], err_msg=name)
    for name in (fields.BOXES, fields.KEYPOINTS):
        np.testing.assert_allclose(out[name], expected[name], atol=1e-6, err_msg=name)


def test_rotation_fills_uncovered_pixels_and_drops_boxes_rotated_out():
    image = np.full([10, 10, 3], 200, np.uint8)
    features = {
        fields.IMAGE: tf.constant(image),
        fields.BOXES: tf.constant([[0.0, 0.0, 0.1, 0.1], [0.4, 0.4, 0.6, 0.6]]),
        fields.CLASSES: tf.constant([1, 2]),
    }
    out = as_numpy(random_rotation(features, seed=3, max_angle=45.0, fill_value=7.0))
    angle_corners = out[fields.IMAGE][[0, 0, -1, -1], [0, -1, 0, -1]]
    np.testing.assert_array_equal(angle_corners[:, 0] < 200, True)
    assert (out[fields.IMAGE] >= 7).all()
    # The centre box survives whatever the angle; the corner box only if it stays inside.
    assert 2 in out[fields.CLASSES]


sizes = st.tuples(st.integers(6, 40), st.integers(6, 40))


@settings(max_examples=25, deadline=None)
@given(features=coord_examples(8, 30), params=affine_params, size=sizes, seed=seeds)
def test_folded_warp_moves_boxes_and_masks_with_the_pixels(box_id, features, params, size, seed):
    """Each output pixel of a coordinate image names the source pixel it shows (nearest
    neighbour): a source pixel wholly inside a box must land inside the moved box, and every
    mask must show the same source pixel as the image."""
    out = as_numpy(
        random_affine(
            features,
            seed=seed,
            interpolation="NEAREST",
            boxes_from_masks=False,
            output_size=size,
            **params,
        )
    )
    source = as_numpy(features)
    height, width = source[fields.IMAGE].shape[:2]
    assert out[fields.IMAGE].shape == (*size, 3) and out[fields.IMAGE].dtype == np.float32
    np.testing.assert_array_equal(out[fields.IMAGE_SHAPE], size)
    content = out[fields.IMAGE][..., 2] == 1
    rows = out[fields.IMAGE][..., 0].astype(int) - 1
    cols = out[fields.IMAGE][..., 1].astype(int) - 1
    kept = [list(source["box_id"]).index(i) for i in out["box_id"]]
    assert kept == sorted(kept)
    centres_y, centres_x = (np.indices(size) + 0.5) / np.reshape(size, [2, 1, 1])
    for position, index in enumerate(kept):
        ymin, xmin, ymax, xmax = source[fields.BOXES][index] * [height, width, height, width]
        inside = content & (rows >= ymin) & (rows + 1 <= ymax) & (cols >= xmin) & (cols + 1 <= xmax)
        ymin, xmin, ymax, xmax = out[fields.BOXES][position]
        ys, xs = centres_y[inside], centres_x[inside]
        assert (ys >= ymin - EPS).all() and (ys <= ymax + EPS).all()
        assert (xs >= xmin - EPS).all() and (xs <= xmax + EPS).all()
        shown = source[fields.MASKS][index][rows.clip(0, height - 1), cols.clip(0, width - 1)]
        np.testing.assert_array_equal(out[fields.MASKS][position], np.where(content, shown, 0))


def _smooth_example(height, width):
    rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    wave = 120 + 60 * np.sin(cols / 7.0) * np.cos(rows / 9.0)
    image = np.stack([wave, 255 - wave, np.full_like(wave, 30.0)], -1).astype(np.float32)
    features = _example(height, width, [[4, 4, 20, 28], [24, 34, 44, 60]])
    features[fields.IMAGE] = tf.constant(image)
    return features


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_folded_warp_equals_warp_then_resize(seed):
    """Zoomed in enough that nothing is filled: one bilinear resampling at the composed
    coordinates is close to two, and boxes (hulls here) and keypoints are the same."""
    features = _smooth_example(48, 64)
    params = {"max_rotation": 10.0, "scale_range": (1.3, 1.3), "boxes_from_masks": False}
    folded = as_numpy(random_affine(features, seed=seed, output_size=(40, 36), **params))
    unfolded = as_numpy(resize_features(random_affine(features, seed=seed, **params), 40, 36))
    assert folded[fields.IMAGE].shape == unfolded[fields.IMAGE].shape == (40, 36, 3)
    np.testing.assert_allclose(folded[fields.IMAGE], unfolded[fields.IMAGE], atol=6.0)
    assert np.abs(folded[fields.IMAGE] - unfolded[fields.IMAGE]).mean() < 1.0
    np.testing.assert_array_equal(folded[fields.CLASSES], unfolded[fields.CLASSES])
    for name in (fields.BOXES, fields.KEYPOINTS):
        np.testing.assert_allclose(folded[name], unfolded[name], atol=1e-5, err_msg=name)


def test_identity_warp_to_the_same_size_is_the_input_as_float():
    features = _example(6, 8, [[0, 0, 2, 3], [3, 3, 6, 8]])
    out = as_numpy(random_rotation(features, max_angle=0.0, output_size=(6, 8)))
    expected = as_numpy(features)
    np.testing.assert_array_equal(out[fields.IMAGE], expected[fields.IMAGE].astype(np.float32))
    for name in (fields.MASKS, fields.BOXES, fields.KEYPOINTS):
        np.testing.assert_allclose(out[name], expected[name], atol=1e-6, err_msg=name)


@pytest.mark.slow
def test_pipeline_folds_its_resize_into_a_trailing_rotation(tmp_path):
    files = write_synthetic_dataset(tmp_path, 4, 1, sizes=((48, 80),), min_objects=2)

    def run(augment, image_size):
        dataset = oi.make_dataset(
            files, augment=augment, image_size=image_size, batch_size=None, seed=5, shuffle=False
        )
        return [as_numpy(example) for example in dataset]

    rotation_step = ("random_rotation", {"max_angle": 30.0})
    folded = run([rotation_step], (64, 64))
    native = run([rotation_step], None)
    for sized, full in zip(folded, native, strict=True):
        assert sized[fields.IMAGE].shape == (64, 64, 3)
        assert sized[fields.IMAGE].dtype == np.float32
        np.testing.assert_array_equal(sized[fields.CLASSES], full[fields.CLASSES])
        np.testing.assert_allclose(sized[fields.BOXES], full[fields.BOXES], atol=1e-5)
        assert ((sized[fields.BOXES] >= 0) & (sized[fields.BOXES] <= 1)).all()
    # A step after the rotation leaves the resize where it was.
    flipped = run([rotation_step, "random_horizontal_flip"], (64, 64))
    assert all(example[fields.IMAGE].shape == (64, 64, 3) for example in flipped)


@pytest.mark.parametrize(
    ("step", "params", "name"),
    [
        ("random_rotation", {"max_angle": 200.0}, "max_angle"),
        ("random_rotation", {"interpolation": "CUBIC"}, "interpolation"),
        ("random_affine", {"scale_range": (1.2, 0.8)}, "scale_range"),
        ("random_affine", {"max_translation": 1.5}, "max_translation"),
        ("random_affine", {"output_size": (0, 4)}, "output_size"),
    ],
)
def test_validation(step, params, name):
    with pytest.raises(ConfigError, match=rf"{step}.*{name}"):
        get_step(step).resolve(params)
