"""mosaic and mixup: exact placement, every per-box field carried, reproducible for a seed."""

import numpy as np
import pytest
import tensorflow as tf
from helpers import as_numpy, over_seeds, seeds
from hypothesis import given, settings
from hypothesis import strategies as st

from object_input import fields
from object_input.ops import Augmentation, ConfigError, get_step, mixup, mosaic
from object_input.ops.combine import beta

COLORS = (40, 90, 140, 190)


def _solid(height, width, color, box_id, boxes=((0.0, 0.0, 1.0, 1.0),)):
    boxes = np.array(boxes, np.float32)
    n = len(boxes)
    masks = np.zeros([n, height, width], np.uint8)
    for i, (y0, x0, y1, x1) in enumerate(boxes):
        top, bottom = round(y0 * height), round(y1 * height)
        masks[i, top:bottom, round(x0 * width) : round(x1 * width)] = 1
    return {
        fields.IMAGE: tf.fill([height, width, 3], tf.constant(color, tf.uint8)),
        fields.BOXES: tf.constant(boxes),
        fields.CLASSES: tf.fill([n], box_id % 7 + 1),
        fields.WEIGHTS: tf.ones([n]),
        fields.MASKS: tf.constant(masks),
        fields.KEYPOINTS: tf.constant((boxes[:, None, :2] + boxes[:, None, 2:]) / 2),
        fields.KEYPOINT_VISIBILITIES: tf.ones([n, 1], tf.bool),
        "box_id": tf.range(n) + box_id,
        fields.SOURCE_ID: tf.constant(str(box_id)),
    }


def test_mosaic_places_each_example_in_its_quarter(box_id):
    examples = [_solid(10, 15, c, 100 * (i + 1)) for i, c in enumerate(COLORS)]
    out = as_numpy(
        mosaic(examples, seed=1, output_size=(20, 30), center_range=(0.5, 0.5), min_visible=0.25)
    )
    image = out[fields.IMAGE][..., 0]
    quarters = [image[:10, :15], image[:10, 15:], image[10:, :15], image[10:, 15:]]
    for quarter, color in zip(quarters, COLORS, strict=True):
        np.testing.assert_allclose(quarter, color)
    np.testing.assert_array_equal(out["box_id"], [100, 200, 300, 400])
    np.testing.assert_allclose(
        out[fields.BOXES],
        [[0, 0, 0.5, 0.5], [0, 0.5, 0.5, 1], [0.5, 0, 1, 0.5], [0.5, 0.5, 1, 1]],
        atol=1e-6,
    )
    for mask, box in zip(out[fields.MASKS], out[fields.BOXES], strict=True):
        rows, cols = np.nonzero(mask)
        np.testing.assert_allclose(
            [rows.min() / 20, cols.min() / 30, (rows.max() + 1) / 20, (cols.max() + 1) / 30], box
        )
    assert out[fields.SOURCE_ID] == b"100"  # image-level fields come from the first example
    np.testing.assert_array_equal(out[fields.IMAGE_SHAPE], [20, 30])
    # A quarter of each box is visible: 0.25 keeps them, anything above drops them.
    stricter = mosaic(
        examples, seed=1, output_size=(20, 30), center_range=(0.5, 0.5), min_visible=0.3
    )
    assert stricter[fields.BOXES].shape[0] == 0 and stricter["box_id"].shape[0] == 0


@st.composite
def four_examples(draw):
    examples = []
    for i, color in enumerate(COLORS):
        height, width = draw(st.integers(4, 16)), draw(st.integers(4, 16))
        y0, x0 = draw(st.floats(0.0, 0.6)), draw(st.floats(0.0, 0.6))
        boxes = [(y0, x0, y0 + draw(st.floats(0.2, 0.4)), x0 + draw(st.floats(0.2, 0.4)))]
        examples.append(_solid(height, width, color, 100 * (i + 1), boxes))
    return examples


@settings(max_examples=15, deadline=None)
@given(examples=four_examples(), seed=seeds, visible=st.floats(0.0, 1.0))
def test_mosaic_boxes_stay_in_their_quarter_and_fields_aligned(box_id, examples, seed, visible):
    out = as_numpy(mosaic(examples, seed=seed, output_size=(24, 32), min_visible=visible))
    again = as_numpy(mosaic(examples, seed=seed, output_size=(24, 32), min_visible=visible))
    for name in out:
        np.testing.assert_array_equal(out[name], again[name])
    image = out[fields.IMAGE][..., 0]
    n = len(out["box_id"])
    assert len(out[fields.BOXES]) == len(out[fields.MASKS]) == len(out[fields.CLASSES]) == n
    np.testing.assert_array_equal(out[fields.CLASSES], out["box_id"] % 7 + 1)
    for box, identity in zip(out[fields.BOXES], out["box_id"], strict=True):
        assert (box >= 0).all() and (box <= 1).all() and box[0] < box[2] and box[1] < box[3]
        color = COLORS[identity // 100 - 1]
        # The box lies in the quarter that shows its example's colour.
        y0, x0 = np.floor(box[:2] * [24, 32]).astype(int)
        y1, x1 = np.maximum(np.ceil(box[2:] * [24, 32]).astype(int), [y0 + 1, x0 + 1])
        inner = image[y0:y1, x0:x1]
        assert (np.abs(inner - color) < 1e-3).mean() > 0.5


@settings(max_examples=10, deadline=None)
@given(examples=four_examples(), seed=seeds, noise=st.integers(0, 2**16))
def test_mosaic_gives_the_same_on_examples_it_prepared(box_id, examples, seed, noise):
    # make_dataset prepares (resizes) each example once before drawing partners; Mosaic must
    # give exactly what it gives on the originals, on images that are not flat colours.
    rng = np.random.default_rng(noise)
    for example in examples:
        shape = example[fields.IMAGE].shape
        example[fields.IMAGE] = tf.constant(rng.integers(0, 256, shape, np.uint8))
    spec, params = Augmentation([("mosaic", {"output_size": (24, 32)})]).steps[0]
    prepared = [spec.prepare(example, **params) for example in examples]
    for example in prepared:
        assert example[fields.IMAGE].dtype == tf.uint8  # rounded back, as Mosaic rounds
        assert max(np.array(example[fields.IMAGE].shape[:2]) / (24, 32)) == pytest.approx(1, 0.1)
    direct = as_numpy(mosaic(examples, seed=seed, output_size=(24, 32)))
    # Resized uint8 images are rounded (as OpenCV's resize rounds): whole values throughout.
    np.testing.assert_array_equal(direct[fields.IMAGE], np.round(direct[fields.IMAGE]))
    again = as_numpy(mosaic(prepared, seed=seed, output_size=(24, 32)))
    assert direct.keys() == again.keys()
    for name in direct:
        np.testing.assert_array_equal(direct[name], again[name], err_msg=name)


def test_mixup_blends_and_scales_the_weights(box_id):
    first = _solid(2, 3, 100, 100)
    second = _solid(3, 2, 200, 200, boxes=((0.0, 0.0, 1.0, 0.5), (0.5, 0.5, 1.0, 1.0)))
    out = as_numpy(mixup([first, second], seed=4, alpha=2.0))
    share = out[fields.WEIGHTS][0]
    assert 0 < share < 1
    np.testing.assert_allclose(out[fields.WEIGHTS], [share, 1 - share, 1 - share], rtol=1e-6)
    expected = np.zeros([3, 3])
    expected[:2, :3] += share * 100
    expected[:3, :2] += (1 - share) * 200
    np.testing.assert_allclose(out[fields.IMAGE][..., 0], expected, rtol=1e-5)
    np.testing.assert_array_equal(out["box_id"], [100, 200, 201])
    np.testing.assert_allclose(
        out[fields.BOXES], [[0, 0, 2 / 3, 1], [0, 0, 1, 1 / 3], [0.5, 1 / 3, 1, 2 / 3]], atol=1e-6
    )
    assert out[fields.MASKS].shape == (3, 3, 3)
    alone = as_numpy(mixup([first, second], seed=4, probability=0.0))
    np.testing.assert_array_equal(alone["box_id"], [100])
    np.testing.assert_array_equal(alone[fields.WEIGHTS], [1.0])


def test_beta_weight_has_the_right_mean_and_spread():
    shares = over_seeds(lambda s: beta(s, 1.5), salt=5, num=1000).numpy()
    # Beta(1.5, 1.5): mean 1/2, variance 1/16; bounds are about 4 standard errors.
    assert abs(shares.mean() - 0.5) < 0.035
    assert abs(shares.var() - 1 / 16) < 0.01


def test_combining_steps_refuse_a_plain_call_and_odd_fields():
    with pytest.raises(ConfigError, match="combines 4 examples"):
        Augmentation([("mosaic", {})])(_solid(2, 2, 0, 1), seed=1)
    with pytest.raises(ValueError, match="different per-box fields"):
        extra = dict(_solid(2, 2, 0, 1))
        del extra[fields.WEIGHTS]
        mixup([_solid(2, 2, 0, 1), extra], seed=1)
    assert get_step("mosaic").examples == 4 and get_step("mixup").examples == 2
    with pytest.raises(ConfigError, match=r"mosaic.*center_range"):
        get_step("mosaic").resolve({"center_range": (0.8, 0.2)})
