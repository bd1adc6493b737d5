"""Tests for autoaugment_image: the image primitives, each op family, the policies v0–v3."""

import math

import numpy as np
import pytest
import tensorflow as tf
from helpers import as_numpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from object_input import fields
from object_input.ops import _image_ops as ops
from object_input.ops import _transform as transform
from object_input.ops import autoaugment as aa
from object_input.ops._registry import ConfigError, get_step
from object_input.ops.flip import rotate90

BOX_ID = "box_id"
SLOW = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# box_id is registered for the whole module: the cached graph functions below are traced with it.
pytestmark = pytest.mark.usefixtures("box_id")


def _f(x):
    return tf.constant(x, tf.float32)


def _levels():
    return np.arange(256, dtype=np.float32).reshape(16, 16, 1)


# Primitives ------------------------------------------------------------------------------------


def test_posterize_keeps_most_significant_bits():
    x = _levels()
    np.testing.assert_array_equal(ops.posterize(_f(x), 2), x.astype(np.uint8) & 0xC0)
    np.testing.assert_array_equal(ops.posterize(_f(x), 8), x)


def test_solarize_inverts_from_threshold():
    x = _levels()
    np.testing.assert_array_equal(ops.solarize(_f(x), 100), np.where(x < 100, x, 255 - x))


def test_solarize_add_below_threshold_with_clipping():
    x = _levels()
    np.testing.assert_array_equal(
        ops.solarize_add(_f(x), 50), np.where(x < 128, np.minimum(x + 50, 255), x)
    )
    np.testing.assert_array_equal(
        ops.solarize_add(_f(x), -30), np.where(x < 128, np.maximum(x - 30, 0), x)
    )


def test_equalize_closed_form():
    # 1024 pixels: 300 × 10, 300 × 50, 424 × 90. step = (1024 − 424) // 255 = 2, so the
    # lookup is 10 → 0, 50 → (300 + 1) // 2 = 150, 90 → (600 + 1) // 2 = 300 → clipped 255.
    values = np.array([10] * 300 + [50] * 300 + [90] * 424, np.float32)
    image = np.stack([values, values[::-1], np.full_like(values, 7)], axis=-1).reshape(32, 32, 3)
    out = ops.equalize(_f(image)).numpy()
    lookup = {10: 0, 50: 150, 90: 255}
    for channel in range(2):
        expected = np.vectorize(lookup.get)(image[..., channel])
        np.testing.assert_array_equal(out[..., channel], expected)
    # A single level has step 0: left as is.
    np.testing.assert_array_equal(out[..., 2], 7)


def test_equalize_two_levels_and_small_image():
    image = np.zeros([32, 32, 3], np.float32)
    image[16:] = 200  # 512 × 0 and 512 × 200: step 2, 200 → (512 + 1) // 2 → 255
    out = ops.equalize(_f(image)).numpy()
    np.testing.assert_array_equal(out, np.where(image > 0, 255, 0))
    small = image[::8, ::8]  # 8 pixels of 0: step 0, unchanged
    np.testing.assert_array_equal(ops.equalize(_f(small)), small)


def test_autocontrast_per_channel():
    image = np.zeros([2, 2, 3], np.float32)
    image[..., 0] = [[50, 100], [75, 100]]
    image[..., 1] = 7
    image[..., 2] = [[0, 255], [3, 4]]
    out = ops.autocontrast(_f(image)).numpy()
    np.testing.assert_allclose(out[..., 0], [[0, 255], [127.5, 255]], atol=1e-4)
    np.testing.assert_array_equal(out[..., 1], 7)
    np.testing.assert_array_equal(out[..., 2], image[..., 2])


def test_enhance_ops_closed_form(rng):
    x = rng.uniform(0, 255, [4, 5, 3]).astype(np.float32)
    gray = x @ np.array([0.2989, 0.5870, 0.1140], np.float32)
    np.testing.assert_allclose(ops.brightness(_f(x), 0.5), x * 0.5, rtol=1e-5)
    np.testing.assert_allclose(ops.brightness(_f(x), 1.9), np.clip(x * 1.9, 0, 255), rtol=1e-5)
    np.testing.assert_allclose(ops.color(_f(x), 0.0), np.repeat(gray[..., None], 3, -1), rtol=1e-5)
    np.testing.assert_allclose(ops.contrast(_f(x), 0.0), np.full_like(x, gray.mean()), rtol=1e-5)
    np.testing.assert_allclose(
        ops.contrast(_f(x), 2.0), np.clip(2 * x - gray.mean(), 0, 255), rtol=1e-4, atol=1e-3
    )
    for op in (ops.brightness, ops.color, ops.contrast, ops.sharpness):
        np.testing.assert_allclose(op(_f(x), 1.0), x, rtol=1e-5)


def test_sharpness_smooths_interior_only():
    image = np.zeros([5, 5, 3], np.float32)
    image[2, 2] = 130
    smooth = np.zeros([5, 5], np.float32)
    smooth[1:4, 1:4] = 10  # 130 / 13 at the centre's neighbours
    smooth[2, 2] = 50  # 5 · 130 / 13
    out = ops.sharpness(_f(image), 0.0).numpy()
    np.testing.assert_allclose(out, np.repeat(smooth[..., None], 3, -1), atol=1e-4)
    sharper = ops.sharpness(_f(image), 2.0).numpy()[..., 0]  # 2 · image − smooth, clipped
    np.testing.assert_allclose(sharper, np.clip(2 * image[..., 0] - smooth, 0, 255), atol=1e-4)


def test_fill_square_writes_the_square_clipped_to_the_image():
    image = np.ones([10, 12, 2], np.float32)
    out = ops.fill_square(_f(image), 5, 6, (2, 3), 128.0).numpy()
    expected = image.copy()
    expected[3:7, 3:9] = 128.0
    np.testing.assert_array_equal(out, expected)
    corner = ops.fill_square(tf.constant(image.astype(np.uint8)), 0, 0, (2, 2), 128.0).numpy()
    assert corner.dtype == np.uint8
    assert (corner[:2, :2] == 128).all() and int((corner == 128).sum()) == 4 * 2
    assert (ops.fill_square(_f(image), 5, 6, (0, 0), 128.0).numpy() == image).all()


def test_warp_translate_exact():
    image = np.arange(6 * 7 * 2, dtype=np.float32).reshape(6, 7, 2)
    out = transform.warp(_f(image), transform.translate_matrix(2, 1), 128.0).numpy()
    np.testing.assert_array_equal(out[1:, 2:], image[:-1, :-2])
    assert (out[0] == 128).all() and (out[:, :2] == 128).all()


def test_warp_rotate_90_matches_rot90():
    image = np.arange(6 * 6 * 3, dtype=np.float32).reshape(6, 6, 3)
    out = transform.warp(_f(image), ops.rotate_matrix(90.0, 6, 6), 128.0)
    np.testing.assert_array_equal(out, tf.image.rot90(image))


# Whole-image geometry --------------------------------------------------------------------------


def _square_example():
    image = np.arange(8 * 8 * 3, dtype=np.uint8).reshape(8, 8, 3)
    mask = np.zeros([1, 8, 8], np.uint8)
    mask[0, 1:3, 2:6] = 1
    return {
        fields.IMAGE: tf.constant(image),
        fields.BOXES: _f([[0.125, 0.25, 0.375, 0.75]]),
        fields.MASKS: tf.constant(mask),
        fields.KEYPOINTS: _f([[[0.2, 0.3], [0.3, 0.6]]]),
        fields.KEYPOINT_VISIBILITIES: tf.constant([[True, True]]),
    }


def test_rotate_90_moves_image_masks_boxes_keypoints_like_rot90():
    features = _square_example()
    out = as_numpy(aa.warp_features(features, ops.rotate_matrix(90.0, 8, 8)))
    expected = as_numpy(rotate90(features, keypoint_rot_permutation=[0, 1]))
    np.testing.assert_array_equal(out[fields.IMAGE], expected[fields.IMAGE])
    np.testing.assert_array_equal(out[fields.MASKS], expected[fields.MASKS])
    np.testing.assert_allclose(out[fields.BOXES], expected[fields.BOXES], atol=1e-5)
    np.testing.assert_allclose(out[fields.KEYPOINTS], expected[fields.KEYPOINTS], atol=1e-5)


def test_shear_moves_box_corners():
    features = {fields.IMAGE: tf.zeros([100, 100, 3]), fields.BOXES: _f([[0.2, 0.2, 0.4, 0.4]])}
    out = aa.warp_features(features, ops.shear_x_matrix(0.5))
    np.testing.assert_allclose(out[fields.BOXES], [[0.2, 0.3, 0.4, 0.6]], atol=1e-6)
    out = aa.warp_features(features, ops.shear_y_matrix(0.5))
    np.testing.assert_allclose(out[fields.BOXES], [[0.3, 0.2, 0.6, 0.4]], atol=1e-6)


def test_rotate_bbox_level_10_is_30_degrees():
    features = {
        fields.IMAGE: tf.zeros([100, 100, 3], tf.uint8),
        fields.BOXES: _f([[0.4] * 2 + [0.6] * 2]),
    }
    half = 0.1 * (math.cos(math.pi / 6) + math.sin(math.pi / 6))
    for seed in range(2):
        out = aa.apply_policy(features, [[("Rotate_BBox", 1.0, 10)]], seed=seed)
        np.testing.assert_allclose(
            out[fields.BOXES], [[0.5 - half] * 2 + [0.5 + half] * 2], atol=1e-5
        )


def test_shear_x_bbox_level_10_is_0_3():
    features = {
        fields.IMAGE: tf.zeros([100, 100, 3], tf.uint8),
        fields.BOXES: _f([[0.2, 0.2, 0.4, 0.4]]),
    }
    candidates = [[0.2, 0.26, 0.4, 0.52], [0.2, 0.08, 0.4, 0.34]]  # x ± 0.3 · y
    seen = set()
    for seed in range(8):
        boxes = aa.apply_policy(features, [[("ShearX_BBox", 1.0, 10)]], seed=seed)[fields.BOXES]
        match = [np.allclose(boxes, [c], atol=1e-5) for c in candidates]
        assert any(match)
        seen.add(match.index(True))
    assert seen == {0, 1}


def _translate_example():
    """50 × 400 image; boxes at x 20–80, 160–240, 320–380 px; each with mask and keypoint."""
    rng = np.random.default_rng(1)
    image = rng.integers(0, 256, [50, 400, 3]).astype(np.uint8)
    boxes = np.array([[0.1, 0.05, 0.3, 0.2], [0.1, 0.4, 0.3, 0.6], [0.1, 0.8, 0.3, 0.95]])
    masks = np.zeros([3, 50, 400], np.uint8)
    for i, (y0, x0, y1, x1) in enumerate((boxes * [50, 400, 50, 400]).astype(int)):
        masks[i, y0:y1, x0:x1] = 1
    keypoints = np.stack([boxes[:, :2] + 0.01, boxes[:, 2:] - 0.01], axis=1)
    return {
        fields.IMAGE: tf.constant(image),
        fields.BOXES: _f(boxes),
        fields.CLASSES: tf.constant([1, 2, 3]),
        fields.AREA: _f([10.0, 20.0, 30.0]),
        fields.IS_CROWD: tf.constant([False, True, False]),
        BOX_ID: tf.constant([0, 1, 2]),
        fields.MASKS: tf.constant(masks),
        fields.KEYPOINTS: _f(keypoints),
        fields.KEYPOINT_VISIBILITIES: tf.ones([3, 2], tf.bool),
    }


def test_translate_x_bbox_moves_everything_by_100_pixels_and_drops_boxes_that_leave():
    features = _translate_example()
    inp = as_numpy(features)
    signs = set()
    for seed in range(6):
        out = as_numpy(aa.apply_policy(features, [[("TranslateX_BBox", 1.0, 4)]], seed=seed))
        sign = 1 if out[BOX_ID][0] == 0 else -1  # +100 px pushes box 2 out, −100 px box 0
        signs.add(sign)
        kept = [0, 1] if sign > 0 else [1, 2]
        np.testing.assert_array_equal(out[BOX_ID], kept)
        np.testing.assert_array_equal(out[fields.CLASSES], inp[fields.CLASSES][kept])
        np.testing.assert_array_equal(out[fields.AREA], inp[fields.AREA][kept])
        np.testing.assert_array_equal(out[fields.IS_CROWD], inp[fields.IS_CROWD][kept])
        shifted = inp[fields.BOXES][kept] + sign * np.array([0, 0.25, 0, 0.25])
        np.testing.assert_allclose(out[fields.BOXES], shifted, atol=1e-6)
        keypoints = inp[fields.KEYPOINTS][kept] + sign * np.array([0, 0.25])
        np.testing.assert_allclose(out[fields.KEYPOINTS], keypoints, atol=1e-6)
        image, masks = inp[fields.IMAGE], inp[fields.MASKS][kept]
        if sign > 0:
            np.testing.assert_array_equal(out[fields.IMAGE][:, 100:], image[:, :300])
            np.testing.assert_array_equal(out[fields.MASKS][:, :, 100:], masks[:, :, :300])
            assert (out[fields.IMAGE][:, :100] == 128).all()
        else:
            np.testing.assert_array_equal(out[fields.IMAGE][:, :300], image[:, 100:])
            np.testing.assert_array_equal(out[fields.MASKS][:, :, :300], masks[:, :, 100:])
            assert (out[fields.IMAGE][:, 300:] == 128).all()
    assert signs == {-1, 1}


def test_keypoint_leaving_the_image_becomes_nan_and_invisible():
    features = {
        fields.IMAGE: tf.zeros([20, 400, 3], tf.uint8),
        fields.BOXES: _f([[0.1, 0.3, 0.5, 0.5]]),
        fields.KEYPOINTS: _f([[[0.2, 0.9], [0.2, 0.1]]]),
        fields.KEYPOINT_VISIBILITIES: tf.constant([[True, True]]),
    }
    for seed in range(4):
        out = as_numpy(aa.apply_policy(features, [[("TranslateX_BBox", 1.0, 4)]], seed=seed))
        lost = 0 if out[fields.BOXES][0, 1] > 0.3 else 1  # moved right: the x = 0.9 one leaves
        assert np.isnan(out[fields.KEYPOINTS][0, lost]).all()
        assert not np.isnan(out[fields.KEYPOINTS][0, 1 - lost]).any()
        np.testing.assert_array_equal(out[fields.KEYPOINT_VISIBILITIES][0], [lost == 1, lost == 0])


# Ops inside boxes ------------------------------------------------------------------------------


def _region_example(with_keypoints=True):
    """60 × 80 image, one box covering rows 15–45 and columns 20–60."""
    rng = np.random.default_rng(2)
    features = {
        fields.IMAGE: tf.constant(rng.integers(0, 256, [60, 80, 3]).astype(np.uint8)),
        fields.BOXES: _f([[0.25, 0.25, 0.75, 0.75]]),
        fields.MASKS: tf.constant(rng.integers(0, 2, [1, 60, 80]).astype(np.uint8)),
    }
    if with_keypoints:
        features[fields.KEYPOINTS] = _f([[[0.5, 0.5]]])
    return features


def _outcomes(features, entry, seeds=range(12)):
    return [as_numpy(aa.apply_policy(features, [[entry]], seed=seed)) for seed in seeds]


def test_translate_y_only_bboxes_moves_content_inside_the_box():
    features = _region_example()
    inp = as_numpy(features)
    image, mask = inp[fields.IMAGE][15:45, 20:60], inp[fields.MASKS][0, 15:45, 20:60]
    applied = 0
    for out in _outcomes(features, ("TranslateY_Only_BBoxes", 1.0, 1)):  # 12 px, p 1/3 per box
        np.testing.assert_array_equal(out[fields.BOXES], inp[fields.BOXES])
        outside = np.ones([60, 80], bool)
        outside[15:45, 20:60] = False
        np.testing.assert_array_equal(out[fields.IMAGE][outside], inp[fields.IMAGE][outside])
        np.testing.assert_array_equal(out[fields.MASKS][0][outside], inp[fields.MASKS][0][outside])
        region, region_mask = out[fields.IMAGE][15:45, 20:60], out[fields.MASKS][0, 15:45, 20:60]
        y = out[fields.KEYPOINTS][0, 0, 0]
        if np.array_equal(region, image):
            assert y == pytest.approx(0.5)
            continue
        applied += 1
        if y > 0.5:  # moved down by 12 rows
            assert y == pytest.approx(42 / 60)
            np.testing.assert_array_equal(region[12:], image[:-12])
            np.testing.assert_array_equal(region_mask[12:], mask[:-12])
            assert (region[:12] == 128).all() and (region_mask[:12] == 0).all()
        else:
            assert y == pytest.approx(18 / 60)
            np.testing.assert_array_equal(region[:-12], image[12:])
            np.testing.assert_array_equal(region_mask[:-12], mask[12:])
            assert (region[-12:] == 128).all() and (region_mask[-12:] == 0).all()
    assert 0 < applied < 12


def test_flip_only_bboxes_mirrors_box_content_and_masks():
    features = _region_example(with_keypoints=False)
    inp = as_numpy(features)
    image, mask = inp[fields.IMAGE][15:45, 20:60], inp[fields.MASKS][0, 15:45, 20:60]
    applied = 0
    for out in _outcomes(features, ("Flip_Only_BBoxes", 1.0, 0)):
        region = out[fields.IMAGE][15:45, 20:60]
        if not np.array_equal(region, image):
            applied += 1
            np.testing.assert_array_equal(region, image[:, ::-1])
            np.testing.assert_array_equal(out[fields.MASKS][0, 15:45, 20:60], mask[:, ::-1])
    assert 0 < applied < 12


def test_flip_only_bboxes_with_keypoints_is_rejected_at_trace_time():
    with pytest.raises(ValueError, match=r"Flip_Only_BBoxes.*keypoint"):
        aa.apply_policy(_region_example(), [[("Flip_Only_BBoxes", 0.5, 0)]], seed=0)
    # v1 lists Flip_Only_BBoxes with probability 0: it never fires, so keypoints are fine.
    aa.autoaugment_image(_region_example(), seed=0, policy_name="v1")


@pytest.mark.parametrize(
    "entry",
    [
        ("Rotate_Only_BBoxes", 1.0, 10),
        ("ShearX_Only_BBoxes", 1.0, 10),
        ("ShearY_Only_BBoxes", 1.0, 10),
        ("TranslateX_Only_BBoxes", 1.0, 2),
        ("Equalize_Only_BBoxes", 1.0, 0),
        ("Solarize_Only_BBoxes", 1.0, 5),
        ("Cutout_Only_BBoxes", 1.0, 4),
    ],
)
def test_only_bboxes_ops_change_nothing_outside_the_box(entry):
    features = _region_example()
    inp = as_numpy(features)
    outside = np.ones([60, 80], bool)
    outside[15:45, 20:60] = False
    changed = 0
    for out in _outcomes(features, entry, seeds=range(8)):
        np.testing.assert_array_equal(out[fields.BOXES], inp[fields.BOXES])
        np.testing.assert_array_equal(out[fields.IMAGE][outside], inp[fields.IMAGE][outside])
        changed += not np.array_equal(out[fields.IMAGE], inp[fields.IMAGE])
    assert changed > 0


# Pixel ops through the policy machinery (level → argument mappings) ----------------------------


@pytest.mark.parametrize(
    ("entry", "before", "after"),
    [
        (("Posterize", 1.0, 2), [100, 200], [0, 128]),  # 1 bit
        (("Posterize", 1.0, 10), [100, 200], [96, 192]),  # 4 bits
        (("Solarize", 1.0, 8), [203, 204], [203, 51]),  # threshold int(0.8 · 256) = 204
        (("SolarizeAdd", 1.0, 4), [100, 128], [144, 128]),  # + int(0.4 · 110) = 44
        (("Brightness", 1.0, 0), [100, 200], [10, 20]),  # factor 0.1
        (("Brightness", 1.0, 5), [100, 200], [100, 200]),  # factor 1.0
        (("Equalize", 1.0, 3), [100, 100], [100, 100]),  # one level: unchanged
    ],
)
def test_level_to_argument(entry, before, after):
    image = np.repeat(np.array(before, np.uint8).reshape(1, 2, 1), 3, axis=-1)
    out = aa.apply_policy({fields.IMAGE: tf.constant(image)}, [[entry]], seed=0)
    np.testing.assert_array_equal(out[fields.IMAGE][0, :, 0], after)


def test_cutout_greys_a_square_on_color_channels_only():
    image = tf.ones([60, 60, 4], tf.uint8)
    for seed in range(4):
        out = aa.apply_policy({fields.IMAGE: image}, [[("Cutout", 1.0, 1)]], seed=seed)
        out = out[fields.IMAGE].numpy()  # pad 10: a 20 × 20 square, clipped at the border
        np.testing.assert_array_equal(out[..., 3], 1)
        rows, cols = np.nonzero(out[..., 0] == 128)
        assert 10 <= rows.max() - rows.min() + 1 <= 20 and 10 <= cols.max() - cols.min() + 1 <= 20
        assert len(rows) == (rows.max() - rows.min() + 1) * (cols.max() - cols.min() + 1)
        assert set(np.unique(out[..., :3])) == {1, 128}


def test_bbox_cutout_greys_a_square_inside_the_chosen_box():
    features = {
        fields.IMAGE: tf.ones([40, 40, 3], tf.uint8),
        fields.BOXES: _f([[0.25] * 2 + [0.75] * 2]),
    }
    for seed in range(4):
        out = aa.apply_policy(features, [[("BBox_Cutout", 1.0, 10)]], seed=seed)
        rows, cols = np.nonzero(out[fields.IMAGE].numpy()[..., 0] == 128)
        # pad fraction 0.75 of a 20-pixel box: half-size 7, centre inside rows/cols 10–29.
        assert len(rows) == 14 * 14
        assert rows.min() >= 3 and rows.max() < 37 and cols.min() >= 3 and cols.max() < 37
    no_boxes = {fields.IMAGE: tf.ones([40, 40, 3], tf.uint8), fields.BOXES: tf.zeros([0, 4])}
    out = aa.apply_policy(no_boxes, [[("BBox_Cutout", 1.0, 10)]], seed=0)
    np.testing.assert_array_equal(out[fields.IMAGE], no_boxes[fields.IMAGE])


# Rates -----------------------------------------------------------------------------------------


def _over_seeds(features, policy, num=400):
    """Outputs for seeds (i, 7), i < num, computed in one tf.data pipeline."""
    dataset = tf.data.Dataset.range(num).map(
        lambda i: aa.apply_policy(features, policy, seed=tf.stack([tf.cast(i, tf.int32), 7]))[
            fields.IMAGE
        ]
    )
    return next(iter(dataset.batch(num))).numpy()


def _within_binomial(count, num, probability):
    sigma = math.sqrt(num * probability * (1 - probability))
    assert abs(count - num * probability) < 4.5 * sigma, (count, num * probability)


def test_op_probability_rate():
    image = tf.fill([4, 4, 3], tf.constant(100, tf.uint8))
    out = _over_seeds({fields.IMAGE: image}, [[("Brightness", 0.3, 0)]])
    _within_binomial(int((out[:, 0, 0, 0] == 10).sum()), 400, 0.3)


def test_per_box_probability_is_a_third():
    features = {
        fields.IMAGE: tf.fill([8, 8, 3], tf.constant(10, tf.uint8)),
        fields.BOXES: _f([[0, 0, 1, 1]]),
    }
    out = _over_seeds(features, [[("Solarize_Only_BBoxes", 0.9, 0)]])  # threshold 0: invert all
    _within_binomial(int((out[:, 0, 0, 0] == 245).sum()), 400, 0.3)


def test_sub_policy_is_chosen_uniformly():
    image = tf.fill([4, 4, 3], tf.constant(100, tf.uint8))
    policy = [
        [("Brightness", 1.0, 0)],  # 10
        [("Solarize", 1.0, 0)],  # 155
        [("SolarizeAdd", 1.0, 10)],  # 210
        [("Posterize", 1.0, 0)],  # 0
    ]
    values = _over_seeds({fields.IMAGE: image}, policy)[:, 0, 0, 0]
    for value in (10, 155, 210, 0):
        _within_binomial(int((values == value).sum()), 400, 0.25)


# Properties in graph mode with unknown shapes --------------------------------------------------

_GRAPH_FNS = {}


def _graph_fn(key, policy):
    """``apply_policy`` traced once with every dimension unknown."""
    if key not in _GRAPH_FNS:
        spec = {
            fields.IMAGE: tf.TensorSpec([None, None, 3], tf.uint8),
            fields.BOXES: tf.TensorSpec([None, 4], tf.float32),
            fields.CLASSES: tf.TensorSpec([None], tf.int32),
            fields.AREA: tf.TensorSpec([None], tf.float32),
            BOX_ID: tf.TensorSpec([None], tf.int32),
            fields.MASKS: tf.TensorSpec([None, None, None], tf.uint8),
            fields.KEYPOINTS: tf.TensorSpec([None, 2, 2], tf.float32),
            fields.KEYPOINT_VISIBILITIES: tf.TensorSpec([None, 2], tf.bool),
        }
        _GRAPH_FNS[key] = tf.function(
            lambda f, s: aa.apply_policy(f, policy, seed=s),
            input_signature=[spec, tf.TensorSpec([2], tf.int32)],
        )
    return _GRAPH_FNS[key]


def _random_example(height, width, num_boxes, data_seed):
    """Boxes in distinct quadrants (2-pixel margins) with a mask and 2 keypoints each."""
    rng = np.random.default_rng(data_seed)
    boxes, masks, keypoints = [], [], []
    for quadrant in rng.permutation(4)[:num_boxes]:
        low = np.array([quadrant // 2, quadrant % 2]) * 0.5 + 2.0 / np.array([height, width])
        corners = np.sort(rng.uniform(low, low + 0.5 - 4.0 / np.array([height, width]), [2, 2]), 0)
        box = np.concatenate([corners[0], corners[1]])
        boxes.append(box)
        yy, xx = np.meshgrid(
            (np.arange(height) + 0.5) / height, (np.arange(width) + 0.5) / width, indexing="ij"
        )
        masks.append((yy >= box[0]) & (yy <= box[2]) & (xx >= box[1]) & (xx <= box[3]))
        keypoints.append(rng.uniform(corners[0], corners[1], [2, 2]))
    n = len(boxes)
    return {
        fields.IMAGE: tf.constant(rng.integers(0, 256, [height, width, 3]).astype(np.uint8)),
        fields.BOXES: _f(np.reshape(boxes, [n, 4])),
        fields.CLASSES: tf.range(n) + 1,
        fields.AREA: _f(np.arange(n) * 10.0),
        BOX_ID: tf.range(n),
        fields.MASKS: tf.constant(np.reshape(masks, [n, height, width]).astype(np.uint8)),
        fields.KEYPOINTS: _f(np.reshape(keypoints, [n, 2, 2])),
        fields.KEYPOINT_VISIBILITIES: tf.ones([n, 2], tf.bool),
    }


def _check_invariants(inp, out):
    """Boxes valid and in [0, 1]; every per-box field aligned; keypoints NaN xor in [0, 1]."""
    ids = out[BOX_ID]
    assert list(ids) == sorted(set(ids)) and set(ids) <= set(inp[BOX_ID])
    for name in fields.per_box_fields():
        if name in out:
            assert out[name].shape[0] == len(ids), name
    np.testing.assert_array_equal(out[fields.CLASSES], ids + 1)
    np.testing.assert_array_equal(out[fields.AREA], inp[fields.AREA][ids])
    boxes = out[fields.BOXES]
    assert ((boxes >= 0) & (boxes <= 1)).all()
    assert (boxes[:, 2] >= boxes[:, 0]).all() and (boxes[:, 3] >= boxes[:, 1]).all()
    keypoints = out[fields.KEYPOINTS]
    nan = np.isnan(keypoints).any(-1)
    assert np.isnan(keypoints[nan]).all()
    assert ((keypoints[~nan] >= -1e-6) & (keypoints[~nan] <= 1 + 1e-6)).all()
    assert not out[fields.KEYPOINT_VISIBILITIES][nan].any()
    assert out[fields.IMAGE].shape == inp[fields.IMAGE].shape
    assert out[fields.IMAGE].dtype == np.uint8


def _near_box(points_yx, box, height, width, tolerance_px):
    pad = tolerance_px / np.array([height, width])
    return ((points_yx >= box[:2] - pad) & (points_yx <= box[2:] + pad)).all()


def _assert_near_boxes(out, height, width, mask_px, keypoint_px):
    """Each mask's pixel centres and visible keypoints lie within so many pixels of its box."""
    for box, mask, keypoints in zip(
        out[fields.BOXES], out[fields.MASKS], out[fields.KEYPOINTS], strict=True
    ):
        rows, cols = np.nonzero(mask)
        centres = np.stack([(rows + 0.5) / height, (cols + 0.5) / width], -1)
        assert _near_box(centres, box, height, width, mask_px)
        visible = keypoints[~np.isnan(keypoints).any(-1)]
        assert _near_box(visible, box, height, width, keypoint_px)


_example_args = {
    "height": st.integers(20, 48),
    "width": st.integers(20, 48),
    "num_boxes": st.integers(0, 4),
    "data_seed": st.integers(0, 2**16),
    "seed": st.integers(0, 2**30),
}

_WHOLE = [
    [("Rotate_BBox", 1.0, 10)],
    [("ShearX_BBox", 1.0, 10)],
    [("ShearY_BBox", 1.0, 10)],
    [("TranslateX_BBox", 1.0, 1)],
    [("TranslateY_BBox", 1.0, 1)],
]


@SLOW
@given(**_example_args)
def test_whole_image_ops_keep_masks_and_keypoints_with_their_boxes(
    height, width, num_boxes, data_seed, seed
):
    inp = _random_example(height, width, num_boxes, data_seed)
    out = as_numpy(_graph_fn("whole", _WHOLE)(inp, tf.constant([seed, 0])))
    inp = as_numpy(inp)
    _check_invariants(inp, out)
    _assert_near_boxes(out, height, width, mask_px=1.5, keypoint_px=1e-3)


_REGION = [
    [("Rotate_Only_BBoxes", 1.0, 10)],
    [("ShearX_Only_BBoxes", 1.0, 10)],
    [("ShearY_Only_BBoxes", 1.0, 10)],
    [("TranslateX_Only_BBoxes", 1.0, 1)],
    [("TranslateY_Only_BBoxes", 1.0, 1)],
]


@SLOW
@given(**_example_args)
def test_only_bboxes_ops_keep_masks_and_keypoints_inside_their_boxes(
    height, width, num_boxes, data_seed, seed
):
    inp = _random_example(height, width, num_boxes, data_seed)
    out = as_numpy(_graph_fn("region", _REGION)(inp, tf.constant([seed, 0])))
    inp = as_numpy(inp)
    _check_invariants(inp, out)
    np.testing.assert_array_equal(out[fields.BOXES], inp[fields.BOXES])
    _assert_near_boxes(out, height, width, mask_px=1.0, keypoint_px=1.0)


@pytest.mark.parametrize(
    "policy_name", ["v0", pytest.param("v1", marks=pytest.mark.slow), "v2", "v3"]
)
@SLOW
@given(**_example_args)
def test_policies_keep_boxes_valid_and_fields_aligned(
    policy_name, height, width, num_boxes, data_seed, seed
):
    inp = _random_example(height, width, num_boxes, data_seed)
    fn = _graph_fn(policy_name, aa.POLICIES[policy_name])
    out = as_numpy(fn(inp, tf.constant([seed, 0])))
    _check_invariants(as_numpy(inp), out)


@pytest.mark.parametrize(
    "policy_name", ["v0", pytest.param("v1", marks=pytest.mark.slow), "v2", "v3"]
)
def test_policies_run_in_dataset_map_and_are_reproducible(policy_name):
    examples = [as_numpy(_random_example(20 + 7 * i, 44 - 5 * i, i % 5, i)) for i in range(6)]
    fn = _graph_fn(policy_name, aa.POLICIES[policy_name])
    signature = fn.input_signature[0]
    dataset = tf.data.Dataset.from_generator(lambda: iter(examples), output_signature=signature)
    dataset = dataset.enumerate().map(lambda i, f: fn(f, tf.stack([tf.cast(i, tf.int32), 3])))
    for index, (inp, out) in enumerate(zip(examples, dataset, strict=True)):
        out = as_numpy(out)
        _check_invariants(inp, out)
        again = as_numpy(fn(inp, tf.constant([index, 3])))  # same seed outside tf.data: same output
        for name in out:
            np.testing.assert_array_equal(out[name], again[name])


# Seeds, dtypes, channels, validation -----------------------------------------------------------


def test_same_seed_same_output_and_seeds_differ():
    features = _random_example(32, 40, 3, 0)
    outputs = [
        as_numpy(aa.autoaugment_image(features, seed=s, policy_name="v2")) for s in (5, 5, 6, 7, 8)
    ]
    for name in outputs[0]:
        np.testing.assert_array_equal(outputs[0][name], outputs[1][name])
    assert any(not np.array_equal(outputs[0][fields.IMAGE], o[fields.IMAGE]) for o in outputs[2:])


def test_seed_none_runs():
    out = aa.autoaugment_image(_random_example(20, 20, 1, 0), seed=None)
    assert out[fields.IMAGE].shape == (20, 20, 3)


def test_float_images_stay_float_on_the_0_255_scale():
    image = tf.random.stateless_uniform([30, 30, 3], [1, 2], 0, 255)
    for seed in range(6):
        out = aa.autoaugment_image(
            {fields.IMAGE: image, fields.BOXES: _f([[0.1, 0.1, 0.6, 0.6]])},
            seed=seed,
            policy_name="v3",
        )
        assert out[fields.IMAGE].dtype == tf.float32
        assert (
            float(tf.reduce_min(out[fields.IMAGE])) >= 0.0
            and float(tf.reduce_max(out[fields.IMAGE])) <= 255.0
        )


def test_color_ops_leave_extra_channels_and_gray_images_work():
    image = np.random.default_rng(3).integers(0, 256, [32, 32, 4]).astype(np.uint8)
    for entry in (
        ("Equalize", 1.0, 0),
        ("Color", 1.0, 0),
        ("Solarize", 1.0, 3),
        ("Sharpness", 1.0, 9),
    ):
        out = aa.apply_policy({fields.IMAGE: tf.constant(image)}, [[entry]], seed=0)[fields.IMAGE]
        np.testing.assert_array_equal(out[..., 3], image[..., 3])
        assert not np.array_equal(out[..., :3], image[..., :3])
    # Gray plus alpha: the colour is channel 0 alone (threshold int(0.3 · 256) = 76).
    gray_alpha = tf.constant(image[..., [0, 3]])
    out = aa.apply_policy({fields.IMAGE: gray_alpha}, [[("Solarize", 1.0, 3)]], seed=0)
    gray = image[..., 0].astype(np.int32)
    np.testing.assert_array_equal(out[fields.IMAGE][..., 0], np.where(gray < 76, gray, 255 - gray))
    np.testing.assert_array_equal(out[fields.IMAGE][..., 1], image[..., 3])
    # Contrast level 0 (factor 0.1) on a single gray channel: 0.1 · x + 0.9 · mean.
    out = aa.apply_policy({fields.IMAGE: tf.constant(image[..., :1])}, [[("Contrast", 1.0, 0)]], 0)
    expected = 0.1 * gray + 0.9 * gray.mean()
    np.testing.assert_allclose(out[fields.IMAGE][..., 0], expected, atol=0.51)
    # Geometry moves every channel.
    out = aa.apply_policy({fields.IMAGE: tf.constant(image)}, [[("TranslateY_BBox", 1.0, 1)]], 0)
    moved = out[fields.IMAGE].numpy()  # 25 rows up or down, all 4 channels, grey fill
    down = np.array_equal(moved[25:], image[:7]) and (moved[:25] == 128).all()
    up = np.array_equal(moved[:7], image[25:]) and (moved[7:] == 128).all()
    assert down or up


def test_invalid_policy_name_is_a_config_error():
    with pytest.raises(ConfigError, match=r"autoaugment_image.*policy_name"):
        get_step("autoaugment_image").resolve({"policy_name": "v9"})
    with pytest.raises(ConfigError, match=r"autoaugment_image.*policy_name"):
        aa.autoaugment_image({fields.IMAGE: tf.zeros([4, 4, 3])}, seed=0, policy_name="test")
    assert get_step("autoaugment_image").resolve({}) == {"policy_name": "v0"}


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ([], "sub-policies"),
        ([[]], "sub-policies"),
        ([[("Rotate", 0.5, 3)]], "unknown AutoAugment op 'Rotate'"),
        ([[("Equalize", 1.5, 3)]], "probability"),
        ([[("Equalize", 0.5, 11)]], "level"),
    ],
)
def test_custom_policy_validation(policy, message):
    with pytest.raises(ValueError, match=message):
        aa.apply_policy({fields.IMAGE: tf.zeros([4, 4, 3])}, policy, seed=0)
