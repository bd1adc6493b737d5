"""Tests for the SSD crop steps: operation choice, operation parsing, and the composed results.

Images encode their pixel coordinates (channel 0 = row + 1, channel 1 = column + 1, channel 2 = 1)
and pads are black, so the output shows which source region landed where on the canvas.
"""

import functools

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
    ssd_random_crop,
    ssd_random_crop_fixed_aspect_ratio,
    ssd_random_crop_pad,
    ssd_random_crop_pad_fixed_aspect_ratio,
)
from object_input.ops.ssd import (
    SSD_CROP_OPERATIONS,
    SSD_CROP_PAD_OPERATIONS,
    SSD_FIXED_ASPECT_OPERATIONS,
)

BLACK = {"pad_color_r": 0.0, "pad_color_g": 0.0, "pad_color_b": 0.0}

# Surviving boxes must keep their ids, for every test here.
pytestmark = pytest.mark.usefixtures("box_id")

# uint8 coordinate images, as decoded.
make_features = functools.partial(coord_features, dtype=np.uint8)

# Boxes inside the image.
_box = st.tuples(
    st.floats(0.0, 0.9), st.floats(0.0, 0.9), st.floats(0.05, 0.6), st.floats(0.05, 0.6)
).map(lambda t: [t[0], t[1], min(t[0] + t[2], 1.0), min(t[1] + t[3], 1.0)])
_examples = coord_examples(4, 16, boxes=_box, dtype=np.uint8)


def _with(operations, **extra):
    return [{**op, **extra} for op in operations]


# --- properties ----------------------------------------------------------------------------


@given(_examples, seeds, st.booleans())
def test_ssd_random_crop_properties(features, seed, clip):
    out = ssd_random_crop(
        features, seed=seed, operations=_with(SSD_CROP_OPERATIONS, clip_boxes=clip)
    )
    (*_, height, width), _ = check_placed(features, out, clip=clip)
    assert (height, width) == tuple(out[fields.IMAGE].shape[:2])  # a pure crop
    again = ssd_random_crop(
        features, seed=seed, operations=_with(SSD_CROP_OPERATIONS, clip_boxes=clip)
    )
    np.testing.assert_array_equal(again[fields.IMAGE], out[fields.IMAGE])


@given(_examples, seeds, st.booleans())
def test_ssd_random_crop_pad_properties(features, seed, clip):
    operations = _with(SSD_CROP_PAD_OPERATIONS, clip_boxes=clip, **BLACK)
    out = ssd_random_crop_pad(features, seed=seed, operations=operations)
    check_placed(features, out, clip=clip)
    height, width = features[fields.IMAGE].shape[:2]
    canvas_h, canvas_w = out[fields.IMAGE].shape[:2]
    assert height <= canvas_h < 2 * height and width <= canvas_w < 2 * width


@given(_examples, seeds, st.sampled_from([0.5, 1.0, 1.5]))
def test_ssd_random_crop_fixed_aspect_ratio_properties(features, seed, ratio):
    out = ssd_random_crop_fixed_aspect_ratio(features, seed=seed, aspect_ratio=ratio)
    check_placed(features, out, clip=True)
    height, width = out[fields.IMAGE].shape[:2]
    assert abs(width / height - ratio) <= max(1.0, ratio) / min(height, width) + 1e-6


@given(_examples, seeds, st.sampled_from([0.5, 1.0, 2.0]))
def test_ssd_random_crop_pad_fixed_aspect_ratio_properties(features, seed, ratio):
    out = ssd_random_crop_pad_fixed_aspect_ratio(features, seed=seed, aspect_ratio=ratio)
    (*_, height, width), _ = check_placed(features, out, clip=True)
    canvas_h, canvas_w = out[fields.IMAGE].shape[:2]
    assert abs(canvas_w / canvas_h - ratio) <= max(1.0, ratio) / min(canvas_h, canvas_w) + 1e-6
    # Zero padding at the bottom/right only: the crop sits at the top-left corner.
    assert out[fields.IMAGE].numpy()[0, 0, 2] == 1
    assert canvas_h >= height and canvas_w >= width


# --- operation choice ----------------------------------------------------------------------


def test_operations_are_chosen_uniformly():
    # Three operations with distinguishable results: unchanged, tall crop, wide crop.
    features = make_features(16, 16, [[0.2, 0.2, 0.6, 0.6]])
    operations = [
        {"random_coef": 1.0},
        {"min_aspect_ratio": 0.5, "max_aspect_ratio": 0.5, "min_area": 0.2, "max_area": 0.3},
        {"min_aspect_ratio": 2.0, "max_aspect_ratio": 2.0, "min_area": 0.2, "max_area": 0.3},
    ]

    def outcome(seed):
        shape = tf.shape(ssd_random_crop(features, seed=seed, operations=operations)["image"])
        return tf.sign(shape[0] - shape[1]) + tf.where(shape[0] == 16, 3, 0)

    results = over_seeds(outcome, salt=9, num=300).numpy()
    assert set(results) == {3, 1, -1}  # unchanged, tall, wide: nothing else
    rates = np.array([(results == v).mean() for v in (3, 1, -1)])
    assert np.abs(rates - 1 / 3).max() < 0.11  # 4 binomial standard deviations at n = 300


def test_single_operation_forced():
    features = make_features(8, 10, [[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0]])
    # random_coef 1: the input comes back unchanged.
    out = ssd_random_crop(features, seed=1, operations=[{"random_coef": 1.0}])
    for name, value in features.items():
        np.testing.assert_array_equal(out[name], value)
    # A whole-image crop (area 1 at the image's own aspect) padded to exactly 1.5×.
    whole = {
        "min_aspect_ratio": 1.25,
        "max_aspect_ratio": 1.25,
        "min_area": 1.0,
        "max_area": 1.0,
        "min_padded_size_ratio": (1.5, 1.5),
        "max_padded_size_ratio": (1.5, 1.5),
    }
    out = ssd_random_crop_pad(features, seed=2, operations=[{**whole, "pad_color_r": 9.0}])
    image = out[fields.IMAGE].numpy()
    assert image.shape == (12, 15, 3)
    corners = image[[0, 0, -1, -1], [0, -1, 0, -1]]
    padding = [c for c in corners if c[2] != 1]
    assert padding and all((c == [9, 0, 0]).all() for c in padding)  # unset channels are 0
    out = ssd_random_crop_pad(features, seed=2, operations=[whole])
    # No colour: the image mean, (4.5, 5.5, 1) rounded half to even. One source pixel has it too.
    matches = (out[fields.IMAGE].numpy() == [4, 6, 1]).all(-1).sum()
    assert matches == 12 * 15 - 8 * 10 + 1


@pytest.mark.slow
def test_in_graph_with_unknown_shapes():
    # Two operations per step keep tracing short while still going through tf.switch_case.
    features = make_features(12, 9, [[0.1, 0.1, 0.6, 0.7], [0.5, 0.2, 0.9, 0.9]])
    steps = (
        functools.partial(ssd_random_crop, operations=SSD_CROP_OPERATIONS[2:4]),
        functools.partial(
            ssd_random_crop_pad, operations=_with(SSD_CROP_PAD_OPERATIONS[:2], **BLACK)
        ),
        functools.partial(
            ssd_random_crop_fixed_aspect_ratio, operations=SSD_FIXED_ASPECT_OPERATIONS[:2]
        ),
        functools.partial(
            ssd_random_crop_pad_fixed_aspect_ratio, operations=SSD_CROP_OPERATIONS[5:]
        ),
    )

    def augment(f, seed):
        return tuple(step(f, seed=seed + i) for i, step in enumerate(steps))

    graph = tf.function(
        augment, input_signature=[unknown_spec(features), tf.TensorSpec([2], tf.int32)]
    )
    for seed in ([4, 4], [1, 7]):
        eager = augment(features, tf.constant(seed))
        for got, expected in zip(graph(features, tf.constant(seed)), eager, strict=True):
            for name in expected:
                np.testing.assert_array_equal(got[name], expected[name])
            check_placed(features, got, clip=True)


def test_in_dataset_map():
    features = make_features(12, 9, [[0.1, 0.1, 0.6, 0.7]])
    operations = _with(SSD_CROP_PAD_OPERATIONS[1:3], **BLACK)
    dataset = tf.data.Dataset.from_tensors(features).map(
        lambda f: ssd_random_crop_pad(f, seed=tf.constant([2, 3]), operations=operations)
    )
    out = next(iter(dataset))
    check_placed(features, out, clip=True)
    eager = ssd_random_crop_pad(features, seed=[2, 3], operations=operations)
    np.testing.assert_array_equal(out[fields.IMAGE], eager[fields.IMAGE])


# --- operations parsing and validation -----------------------------------------------------


def test_default_operations_match_the_spec():
    coverages = [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]
    for defaults, expected in (
        (SSD_CROP_OPERATIONS, coverages),
        (SSD_CROP_PAD_OPERATIONS, coverages[1:]),
        (SSD_FIXED_ASPECT_OPERATIONS, coverages),
    ):
        assert [op["min_object_covered"] for op in defaults] == expected
        assert [op["overlap_thresh"] for op in defaults] == expected
        assert all(op["random_coef"] == 0.15 and op["clip_boxes"] for op in defaults)
        assert all((op["min_area"], op["max_area"]) == (0.1, 1.0) for op in defaults)
    assert all(
        (op["min_aspect_ratio"], op["max_aspect_ratio"]) == (0.5, 2.0) for op in SSD_CROP_OPERATIONS
    )
    assert not any("min_aspect_ratio" in op for op in SSD_FIXED_ASPECT_OPERATIONS)
    assert all(
        op["min_padded_size_ratio"] == (1.0, 1.0)
        and op["max_padded_size_ratio"] == (2.0, 2.0)
        and op["pad_color_r"] is None
        for op in SSD_CROP_PAD_OPERATIONS
    )
    assert get_step("ssd_random_crop").resolve({}) == {"operations": None}
    assert get_step("ssd_random_crop_pad_fixed_aspect_ratio").resolve({}) == {
        "operations": None,
        "aspect_ratio": 1.0,
        "min_padded_size_ratio": (1.0, 1.0),
        "max_padded_size_ratio": (2.0, 2.0),
    }


def test_config_operations_from_pipeline_config():
    # The operation of the pipeline.config users already have (overlap_thresh written out).
    config = [
        {
            "min_object_covered": 0.0,
            "min_aspect_ratio": 0.5,
            "max_aspect_ratio": 2.0,
            "min_area": 0.1,
            "max_area": 1.0,
            "overlap_thresh": 0.0,
            "random_coef": 0.15,
        }
    ]
    params = get_step("ssd_random_crop").resolve({"operations": config})
    out = ssd_random_crop(make_features(8, 8, [[0.1, 0.1, 0.5, 0.5]]), seed=0, **params)
    assert out[fields.IMAGE].shape[2] == 3


@pytest.mark.parametrize(
    ("step", "operations", "phrase"),
    [
        ("ssd_random_crop", [], "at least one operation"),
        ("ssd_random_crop", [{"min_area": 0.5}, {"colour": 1}], "operation #1 has unknown key"),
        ("ssd_random_crop", [{"min_object_covered": 1.5}], "min_object_covered must be in"),
        ("ssd_random_crop", [{"min_aspect_ratio": 3.0}], "min_aspect_ratio <= max_aspect_ratio"),
        ("ssd_random_crop", [{"max_area": 1.5}], "min_area <= max_area <= 1"),
        ("ssd_random_crop", [{"clip_boxes": "no"}], "clip_boxes must be true or false"),
        ("ssd_random_crop", [{"random_coef": "0.1"}], "random_coef must be a number"),
        ("ssd_random_crop", [3], "must be a list of dict"),
        ("ssd_random_crop_pad", [{"pad_color_r": "red"}], "pad_color_r must be a number"),
        ("ssd_random_crop_pad", [{"min_padded_size_ratio": (1.0,)}], "pair of numbers > 0"),
        ("ssd_random_crop_fixed_aspect_ratio", [{"min_aspect_ratio": 1.0}], "unknown key"),
        ("ssd_random_crop_pad_fixed_aspect_ratio", [{"pad_color_r": 1.0}], "unknown key"),
    ],
)
def test_operation_validation(step, operations, phrase):
    with pytest.raises(ConfigError, match=rf"{step}.*'operations'.*{phrase}"):
        get_step(step).resolve({"operations": operations})


def test_top_level_validation_and_direct_calls():
    with pytest.raises(ConfigError, match=r"ssd_random_crop_fixed_aspect_ratio.*aspect_ratio"):
        get_step("ssd_random_crop_fixed_aspect_ratio").resolve({"aspect_ratio": 0.0})
    with pytest.raises(ConfigError, match="max_padded_size_ratio"):
        get_step("ssd_random_crop_pad_fixed_aspect_ratio").resolve(
            {"max_padded_size_ratio": (2.0, -1.0)}
        )
    with pytest.raises(ValueError, match="ssd_random_crop_pad: operations operation #0"):
        ssd_random_crop_pad(make_features(4, 4, []), operations=[{"max_area": 2.0}])
