"""The device stage against the host steps: same annotations, same pixels (or the same draws
after the resize), GPU kernels and XLA for every op it runs."""

import numpy as np
import pytest
import tensorflow as tf
from helpers import seeds
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorflow.python.framework import kernels

from object_input import fields
from object_input.ops import Augmentation, get_step, registered_steps
from object_input.ops import _batched as device_ops
from object_input.ops._device_stage import DeviceStage, apply_device_stage

SIZE = (24, 32)
BOXES = np.array([[0.1, 0.1, 0.5, 0.45], [0.4, 0.5, 0.95, 0.9], [0.0, 0.0, 1.0, 1.0]], np.float32)

SLOW = pytest.mark.slow

# Step, parameters, and how close the device's pixels come to the host's on an image already at
# the output size (max absolute difference on the [0, 255] scale; None: compared otherwise).
PARITY = [
    ("random_horizontal_flip", {}, 0.0),
    ("random_vertical_flip", {"probability": 0.7}, 0.0),
    ("random_rotation", {"max_angle": 40.0, "probability": 0.8}, 0.05),
    ("random_rotation", {"max_angle": 40.0, "interpolation": "NEAREST", "fill_value": 9.0}, None),
    (
        "random_affine",
        {
            "max_rotation": 20.0,
            "max_shear": 10.0,
            "max_translation": 0.2,
            "scale_range": (0.7, 1.3),
            "fill_value": 128.0,
        },
        0.05,
    ),
    ("random_gaussian_blur", {"probability": 0.7, "sigma_range": (0.2, 2.5)}, 1e-3),
    ("random_sharpness", {"probability": 0.7, "factor_range": (0.0, 3.0)}, 1e-3),
    ("random_posterize", {"probability": 0.7, "bits_range": (1, 7)}, 0.0),
    ("random_solarize", {"probability": 0.7, "threshold_range": (0.0, 256.0)}, 0.0),
    ("random_equalize", {"probability": 0.7}, 0.0),
    ("random_autocontrast", {"probability": 0.7}, 1e-3),
    ("random_invert", {"probability": 0.7}, 0.0),
    ("random_cutout", {"probability": 0.7, "num_patches": 2, "size_range": (0.2, 0.6)}, 0.0),
    ("random_adjust_brightness", {}, 1e-3),
    ("random_adjust_contrast", {"min_delta": 0.3, "max_delta": 1.7}, 1e-2),
    ("random_adjust_hue", {"max_delta": 0.3}, 1e-2),
    ("random_adjust_saturation", {"min_delta": 0.2, "max_delta": 2.0}, 1e-2),
    ("random_distort_color", {"color_ordering": 1}, 1e-2),
    ("random_rgb_to_gray", {"probability": 0.5}, 1e-2),
    # The policies take 2.5-4 s each: the short loop (-m "not slow") leaves them to CI.
    pytest.param("randaugment_detection", {"magnitude": 9, "num_layers": 3}, 1e-3, marks=SLOW),
    pytest.param("autoaugment_image", {"policy_name": "v2"}, 1e-3, marks=SLOW),
    pytest.param("autoaugment_image", {"policy_name": "v3"}, 1e-3, marks=SLOW),
]


def example(index, size=SIZE, masks=False):
    """A float32 image of smooth gradients and texture, three boxes, optional instance masks."""
    rng = np.random.default_rng(index)
    rows, cols = np.mgrid[0 : size[0], 0 : size[1]].astype(np.float32)
    image = np.stack(
        [rows * 255 / size[0], cols * 255 / size[1], rng.uniform(0, 255, size)], axis=-1
    ).astype(np.float32)
    features = {
        fields.IMAGE: tf.constant(image),
        fields.BOXES: tf.constant(BOXES),
        fields.CLASSES: tf.constant([1, 2, 3], tf.int32),
        fields.NUM_DROPPED_BOXES: tf.constant(0, tf.int32),
    }
    if masks:
        mask = np.zeros((3, *size), np.uint8)
        for i, (top, left, bottom, right) in enumerate(BOXES):
            mask[
                i,
                int(top * size[0]) : int(bottom * size[0]),
                int(left * size[1]) : int(right * size[1]),
            ] = 1
        features[fields.MASKS] = tf.constant(mask)
    return features


def host_and_device(name, params, count=6, salt=0, masks=False):
    """Each example through the host step, and through the device stage (XLA, on a batch)."""
    augment = Augmentation([(name, params)])
    stage = DeviceStage.required(augment, "test")
    host, prepared = [], []
    for index in range(count):
        features = example(index, masks=masks)
        seed = tf.constant([index, salt])
        host.append(augment(features, seed))
        prepared.append(stage.prepare(features, seed))
    images = tf.stack([p[fields.IMAGE] for p in prepared])
    parameters = tf.stack([p[fields.DEVICE_PARAMETERS] for p in prepared])
    compiled = tf.function(stage.__call__, jit_compile=True, autograph=False)
    return host, prepared, compiled(images, parameters).numpy()


_WITH_MASKS = ("random_rotation", "randaugment_detection", "autoaugment_image")


@pytest.mark.parametrize(("name", "params", "tolerance"), PARITY)
def test_annotations_are_the_host_steps_and_pixels_match(name, params, tolerance):
    count = 16 if name in _WITH_MASKS else 6
    host, prepared, pixels = host_and_device(name, params, count, masks=name in _WITH_MASKS)
    for index, (expected, got) in enumerate(zip(host, prepared, strict=True)):
        assert set(got) - {fields.DEVICE_PARAMETERS} == set(expected)
        for key in expected:
            if key != fields.IMAGE:
                np.testing.assert_array_equal(got[key].numpy(), expected[key].numpy(), err_msg=key)
        # The host left the image to the device.
        np.testing.assert_array_equal(
            got[fields.IMAGE].numpy(), example(index)[fields.IMAGE].numpy()
        )
    expected_pixels = np.stack([features[fields.IMAGE].numpy() for features in host])
    if tolerance is None:
        # Nearest neighbour: rounding at a half pixel may pick the other neighbour.
        assert np.mean(np.abs(pixels - expected_pixels) > 1e-3) < 0.01
    else:
        np.testing.assert_allclose(pixels, expected_pixels, atol=tolerance, rtol=0)


def test_policies_warp_some_images_and_change_the_pixels_of_others():
    # Each position carries one code per image: the batch mixes warps, pixel ops and nothing.
    _, prepared, _ = host_and_device("randaugment_detection", {"magnitude": 5}, count=16)
    codes = np.stack([p[fields.DEVICE_PARAMETERS].numpy()[0::12] for p in prepared])
    assert {0, 1} <= set(codes.ravel()) and codes.max() > 2


def test_steps_act_on_some_images_and_not_others():
    _, _, pixels = host_and_device("random_gaussian_blur", {"probability": 0.5}, count=8)
    changed = [
        not np.array_equal(p, example(i)[fields.IMAGE].numpy()) for i, p in enumerate(pixels)
    ]
    assert 0 < sum(changed) < 8


def test_cutout_drops_and_counts_hidden_boxes_like_the_host():
    params = {"probability": 1.0, "num_patches": 3, "size_range": (0.5, 0.9)}
    host, prepared, _ = host_and_device("random_cutout", params, count=12)
    dropped = [int(p[fields.NUM_DROPPED_BOXES]) for p in prepared]
    assert sum(dropped) > 0
    assert dropped == [int(h[fields.NUM_DROPPED_BOXES]) for h in host]


def test_random_erasing_fills_its_patches_with_whole_levels():
    params = {"probability": 1.0, "size_range": (0.5, 0.5), "fill_value": None}
    host, _, pixels = host_and_device("random_cutout", params, count=4)
    for index, (expected, got) in enumerate(zip(host, pixels, strict=True)):
        original = example(index)[fields.IMAGE].numpy()
        patch = expected[fields.IMAGE].numpy() != original
        # The same patch as the host's; noise of its own, whole levels in [0, 255].
        np.testing.assert_array_equal(got[~patch], original[~patch])
        noise = got[patch]
        assert np.all(noise == np.floor(noise)) and noise.min() >= 0 and noise.max() <= 255
        assert noise.std() > 40


def test_patch_gaussian_adds_noise_of_the_drawn_size_inside_the_patch_only():
    params = {
        "min_patch_size": 12,
        "max_patch_size": 12,
        "min_gaussian_stddev": 0.1,
        "max_gaussian_stddev": 0.1,
    }
    host, _, pixels = host_and_device("random_patch_gaussian", params, count=4)
    for index, (expected, got) in enumerate(zip(host, pixels, strict=True)):
        original = example(index)[fields.IMAGE].numpy()
        patch = np.any(expected[fields.IMAGE].numpy() != original, axis=-1)
        np.testing.assert_array_equal(got[~patch], original[~patch])
        inside = (got - original)[patch]
        assert np.count_nonzero(inside) > 0.9 * inside.size
        unclipped = inside[(original[patch] > 80) & (original[patch] < 175)]
        assert 0.6 * 25.5 < unclipped.std() < 1.4 * 25.5


def test_the_same_parameters_give_the_same_pixels():
    steps = [("random_cutout", {"probability": 1.0, "fill_value": None}), "random_patch_gaussian"]
    stage = DeviceStage.required(steps, "test")
    prepared = [stage.prepare(example(i), tf.constant([i, 5])) for i in range(3)]
    images = tf.stack([p[fields.IMAGE] for p in prepared])
    parameters = tf.stack([p[fields.DEVICE_PARAMETERS] for p in prepared])
    np.testing.assert_array_equal(stage(images, parameters), stage(images, parameters))


# --- boxes follow pixels, through the resize -------------------------------------------------

WARPS = [
    ("random_rotation", {"max_angle": 45.0}),
    (
        "random_affine",
        {
            "max_rotation": 30.0,
            "max_shear": 15.0,
            "max_translation": 0.3,
            "scale_range": (0.5, 1.5),
        },
    ),
    ("random_horizontal_flip", {}),
    ("random_vertical_flip", {}),
]


@settings(max_examples=25, deadline=None)
@given(
    seed=seeds,
    step=st.sampled_from(WARPS),
    box=st.tuples(*[st.floats(0.05, 0.45)] * 2, *[st.floats(0.55, 0.95)] * 2),
    output=st.sampled_from([(30, 40), (20, 60), (45, 30)]),
)
def test_moved_boxes_hold_the_moved_object_after_any_resize(seed, step, box, output):
    """A white box on black, warped on the host's box and on the device's pixels after a resize
    to another aspect ratio: the bright pixels stay in the moved box (one pixel of slack)."""
    height, width = 36, 48
    top, left, bottom, right = box[0], box[1], box[2], box[3]
    image = np.zeros((height, width, 3), np.float32)
    image[
        round(top * height) : round(bottom * height), round(left * width) : round(right * width)
    ] = 255
    features = {
        fields.IMAGE: tf.constant(image),
        fields.BOXES: tf.constant(
            [
                [
                    round(top * height) / height,
                    round(left * width) / width,
                    round(bottom * height) / height,
                    round(right * width) / width,
                ]
            ]
        ),
        fields.CLASSES: tf.constant([1]),
    }
    stage = DeviceStage.required([step], "test")
    prepared = stage.prepare(features, tf.constant([seed, 1]))
    resized = tf.image.resize(prepared[fields.IMAGE], output)[tf.newaxis]
    pixels = stage(resized, prepared[fields.DEVICE_PARAMETERS][tf.newaxis]).numpy()[0]
    bright = np.argwhere(pixels[..., 0] > 200)
    if not len(prepared[fields.BOXES]):
        assert len(bright) == 0  # moved out of the image: the box was dropped
        return
    ymin, xmin, ymax, xmax = prepared[fields.BOXES].numpy()[0] * np.array([*output, *output])
    assert np.all(bright[:, 0] + 0.5 >= ymin - 1) and np.all(bright[:, 0] + 0.5 <= ymax + 1)
    assert np.all(bright[:, 1] + 0.5 >= xmin - 1) and np.all(bright[:, 1] + 0.5 <= xmax + 1)


def test_normalized_matrix_round_trips_a_pixel_matrix():
    matrix = tf.constant([[0.9, 0.2, 5.0], [-0.1, 1.1, -3.0], [0.0, 0.0, 1.0]])
    normalized = device_ops.normalized_matrix(matrix, 30, 40).numpy()
    # A point (x, y) in pixels, normalized, moved, and scaled back: the pixel matrix's result.
    x, y = 12.0, 7.0
    nx = normalized[0] * x / 40 + normalized[1] * y / 30 + normalized[2]
    ny = normalized[3] * x / 40 + normalized[4] * y / 30 + normalized[5]
    np.testing.assert_allclose(
        [nx * 40, ny * 30], [0.9 * x + 0.2 * y + 5, -0.1 * x + 1.1 * y - 3], rtol=1e-6
    )


# --- accelerator-ready by construction ------------------------------------------------------

DEVICE_STEPS = sorted(name for name in registered_steps() if get_step(name).device is not None)
_POLICIES = {"randaugment_detection", "autoaugment_image"}
# Ops that would pin the stage to the host, or that XLA cannot compile.
_FORBIDDEN = {
    "PyFunc",
    "EagerPyFunc",
    "PyFuncStateless",
    "ScaleAndTranslate",
    "ImageProjectiveTransformV3",
    "DecodeImage",
    "DecodeJpeg",
    "DecodePng",
}


def _op_types(graph_def):
    types = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        types |= {node.op for node in function.node_def}
    return types


def test_every_step_with_a_device_form_is_listed():
    assert set(DEVICE_STEPS) >= {
        "random_horizontal_flip",
        "random_vertical_flip",
        "random_rotation",
        "random_affine",
        "random_gaussian_blur",
        "random_sharpness",
        "random_posterize",
        "random_solarize",
        "random_equalize",
        "random_autocontrast",
        "random_invert",
        "random_cutout",
        "random_patch_gaussian",
        "random_adjust_brightness",
        "random_adjust_contrast",
        "random_adjust_hue",
        "random_adjust_saturation",
        "random_distort_color",
        "random_rgb_to_gray",
        "randaugment_detection",
        "autoaugment_image",
    }


@pytest.mark.parametrize(
    "name",
    # The policies' XLA compiles take 2-2.6 s each: the short loop leaves them to CI.
    [pytest.param(n, marks=SLOW) if n in _POLICIES else n for n in DEVICE_STEPS],
)
def test_device_form_has_gpu_kernels_and_compiles_with_xla(name):
    params = dict(get_step(name).demo_params)
    stage = DeviceStage.required([(name, params)], "test")
    images = tf.TensorSpec([2, *SIZE, 3], tf.float32)
    parameters = tf.TensorSpec([2, stage.num_parameters], tf.float32)
    compiled = tf.function(stage.__call__, jit_compile=True, autograph=False)
    graph = compiled.get_concrete_function(images, parameters).graph.as_graph_def()
    types = _op_types(graph)
    assert not types & _FORBIDDEN
    missing = sorted(
        op
        for op in types
        # A DEFAULT kernel (function calls, arguments) runs on any device.
        if not {"GPU", "DEFAULT"}
        & {k.device_type for k in kernels.get_registered_kernels_for_op(op).kernel}
    )
    assert not missing, f"{name}: ops without a GPU kernel: {missing}"
    prepared = [stage.prepare(example(i), tf.constant([i, 2])) for i in range(2)]
    out = compiled(
        tf.stack([p[fields.IMAGE] for p in prepared]),
        tf.stack([p[fields.DEVICE_PARAMETERS] for p in prepared]),
    )
    assert out.shape == (2, *SIZE, 3) and out.dtype == tf.float32
    assert np.all(np.isfinite(out.numpy()))


@pytest.mark.parametrize("name", DEVICE_STEPS)
def test_device_form_gives_the_same_pixels_in_a_graph_without_xla(name):
    # DeviceAugmentation(jit_compile=False) and custom loops run the stage in a plain graph,
    # where TensorFlow's graph optimizer rewrites what XLA does not see.
    params = dict(get_step(name).demo_params)
    stage = DeviceStage.required([(name, params)], "test")
    prepared = [stage.prepare(example(i), tf.constant([i, 4])) for i in range(3)]
    images = tf.stack([p[fields.IMAGE] for p in prepared])
    parameters = tf.stack([p[fields.DEVICE_PARAMETERS] for p in prepared])
    graph = tf.function(stage.__call__, autograph=False)
    np.testing.assert_allclose(graph(images, parameters), stage(images, parameters), atol=1e-3)


# --- what cannot move, and the batch function ------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        (["random_adjust_hue", "random_crop_image"], "'random_crop_image' has no device form"),
        ([("random_rotation", {"output_size": (8, 8)})], "'random_rotation' has output_size set"),
        (
            [("autoaugment_image", {"policy_name": "v1"})],
            r"'autoaugment_image' with policy 'v1' has ops inside each box \(Cutout_Only_BBoxes, "
            "Equalize_Only_BBoxes, ShearX_Only_BBoxes",
        ),
        ([], "there are no steps"),
    ],
)
def test_a_stage_that_cannot_move_names_the_step_and_why(steps, message):
    with pytest.raises(ValueError, match=message):
        DeviceStage.required(steps, "test")


def test_split_keeps_steps_before_the_trailing_run_on_the_host():
    start, stage = DeviceStage.split(
        ["random_adjust_hue", "random_crop_image", "random_horizontal_flip", "random_gaussian_blur"]
    )
    assert start == 2 and stage.names == ("random_horizontal_flip", "random_gaussian_blur")


def test_stage_needs_static_batch_shapes():
    stage = DeviceStage.required(["random_gaussian_blur"], "test")
    traced = tf.function(
        stage.__call__,
        input_signature=[tf.TensorSpec([None, None, None, 3]), tf.TensorSpec([None, 3])],
    )
    with pytest.raises(ValueError, match=r"random_gaussian_blur\) needs batches \[B, H, W, C\]"):
        traced.get_concrete_function()


def test_apply_device_stage_consumes_the_parameters():
    steps = ["random_horizontal_flip"]
    stage = DeviceStage.required(steps, "test")
    prepared = stage.prepare(example(0), tf.constant([1, 1]))
    batch = {key: value[tf.newaxis] for key, value in prepared.items()}
    out = apply_device_stage(batch, steps)
    assert fields.DEVICE_PARAMETERS not in out and out[fields.IMAGE].dtype == tf.float32
    with pytest.raises(ValueError, match="trailing_steps='device'"):
        apply_device_stage(out, steps)


def test_the_op_reference_lists_each_device_step_with_its_fidelity():
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "ops.md").read_text()
    for name in DEVICE_STEPS:
        fidelity = get_step(name).device.fidelity
        assert f"| `{name}` | {fidelity} |" in text, name
