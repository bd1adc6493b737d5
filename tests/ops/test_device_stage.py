"""make_dataset(trailing_steps="device") and the DeviceAugmentation layer."""

from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input import fields, recipes
from object_input.keras.layers import DeviceAugmentation

SIZE = (40, 48)
HEAVY = [
    ("random_horizontal_flip", {}),
    ("random_rotation", {"max_angle": 30.0}),
    ("random_gaussian_blur", {"probability": 0.7}),
    ("random_sharpness", {}),
    ("random_cutout", {"probability": 0.7, "size_range": (0.3, 0.6)}),
    "random_adjust_brightness",
    "random_adjust_saturation",
]
CROP = [("random_crop_image", {"min_object_covered": 0.0})]


def first_batch(directory, steps, **options):
    options = {"batch_size": 6, "image_size": SIZE, "max_boxes": 8, "seed": 3, **options}
    return next(iter(oi.make_dataset(directory, augment=steps, **options)))


@pytest.mark.slow
def test_annotations_are_those_of_the_host_pipeline(synthetic_dir):
    device = first_batch(synthetic_dir, [*CROP, *HEAVY], trailing_steps="device")
    exact = first_batch(synthetic_dir, [*CROP, *HEAVY], trailing_steps="exact")
    for key in (fields.BOXES, fields.CLASSES, fields.NUM_BOXES, fields.NUM_DROPPED_BOXES):
        np.testing.assert_array_equal(device[key], exact[key], err_msg=key)
    # The host did the crop and left the trailing steps' pixels to the device.
    crop_only = first_batch(synthetic_dir, CROP)
    np.testing.assert_array_equal(device[fields.IMAGE], crop_only[fields.IMAGE])
    assert device[fields.DEVICE_PARAMETERS].shape == (6, 1 + 6 + 3 + 2 + 7 + 1 + 1)


def test_layer_pixels_equal_the_host_where_the_step_commutes_with_the_resize(synthetic_dir):
    steps = [*CROP, ("random_horizontal_flip", {}), ("random_vertical_flip", {})]
    device = first_batch(synthetic_dir, steps, trailing_steps="device")
    exact = first_batch(synthetic_dir, steps, trailing_steps="exact")
    flipped = DeviceAugmentation(steps)((device[fields.IMAGE], device[fields.DEVICE_PARAMETERS]))
    np.testing.assert_allclose(flipped, tf.cast(exact[fields.IMAGE], tf.float32), atol=1e-3)
    assert not np.array_equal(flipped, device[fields.IMAGE])


@pytest.mark.slow
def test_layer_pixels_match_the_host_in_distribution_after_the_resize(synthetic_dir):
    steps = [*CROP, ("random_rotation", {"max_angle": 20.0})]
    device = first_batch(synthetic_dir, steps, trailing_steps="device")
    exact = first_batch(synthetic_dir, steps, trailing_steps="exact")
    rotated = DeviceAugmentation(steps)((device[fields.IMAGE], device[fields.DEVICE_PARAMETERS]))
    # Warped after the resize instead of before it: interpolation differences only.
    difference = np.abs(rotated.numpy() - exact[fields.IMAGE].numpy())
    assert np.median(difference) < 2.0
    assert np.abs(rotated.numpy() - device[fields.IMAGE].numpy()).mean() > 2 * difference.mean()


@pytest.mark.slow
def test_batches_are_the_same_run_after_run(synthetic_dir):
    first = first_batch(synthetic_dir, HEAVY, trailing_steps="device", num_parallel_calls=2)
    second = first_batch(synthetic_dir, HEAVY, trailing_steps="device", num_parallel_calls=1)
    for key in (fields.IMAGE, fields.BOXES, fields.DEVICE_PARAMETERS):
        np.testing.assert_array_equal(first[key], second[key])


@pytest.mark.slow
def test_keras_inputs_are_images_and_parameters_and_targets_are_final(synthetic_dir):
    inputs, targets = first_batch(synthetic_dir, HEAVY, trailing_steps="device", keras=True)
    images, parameters = inputs
    assert images.shape == (6, *SIZE, 3) and parameters.shape[0] == 6
    exact = first_batch(synthetic_dir, HEAVY, trailing_steps="exact")
    np.testing.assert_array_equal(targets["boxes"], exact[fields.BOXES])


@pytest.mark.slow
def test_layer_in_a_model_fits_saves_and_loads(synthetic_dir, tmp_path):
    dataset = oi.make_dataset(
        synthetic_dir,
        augment=HEAVY,
        batch_size=4,
        image_size=SIZE,
        max_boxes=8,
        seed=1,
        trailing_steps="device",
        batching="static",
        output_dtype="uint8",
    ).map(
        lambda batch: (
            (batch[fields.IMAGE], batch[fields.DEVICE_PARAMETERS]),
            tf.cast(batch[fields.NUM_BOXES], tf.float32),
        )
    )
    images = keras.Input((*SIZE, 3), dtype="uint8")
    parameters = keras.Input((dataset.element_spec[0][1].shape[1],))
    augmented = DeviceAugmentation(HEAVY)((images, parameters))
    output = keras.layers.Dense(1)(keras.layers.GlobalAveragePooling2D()(augmented))
    model = keras.Model([images, parameters], output)
    model.compile("sgd", "mse", jit_compile=True)
    history = model.fit(dataset, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    batch = next(iter(dataset))[0]
    np.testing.assert_allclose(loaded(batch), model(batch), rtol=1e-5)


def test_layer_passes_images_through_at_inference_and_takes_batch_dicts(synthetic_dir):
    batch = first_batch(synthetic_dir, HEAVY, trailing_steps="device", output_dtype="uint8")
    layer = DeviceAugmentation(HEAVY)
    passed = layer((batch[fields.IMAGE], batch[fields.DEVICE_PARAMETERS]), training=False)
    np.testing.assert_array_equal(passed, tf.cast(batch[fields.IMAGE], tf.float32))
    out = layer(batch)
    assert fields.DEVICE_PARAMETERS not in out
    np.testing.assert_array_equal(out[fields.BOXES], batch[fields.BOXES])
    np.testing.assert_allclose(
        out[fields.IMAGE], oi.apply_device_stage(batch, HEAVY)[fields.IMAGE], atol=1e-3
    )
    rebuilt = DeviceAugmentation.from_config(layer.get_config())
    assert rebuilt.stage.names == layer.stage.names


def test_a_pipeline_whose_last_step_cannot_move_says_which_and_why(synthetic_dir):
    with pytest.raises(ValueError, match="'random_crop_image' has no device form"):
        first_batch(synthetic_dir, [*HEAVY, *CROP], trailing_steps="device")
    with pytest.raises(ValueError, match=r"DeviceAugmentation: .*'random_crop_image'"):
        DeviceAugmentation(CROP)


# --- every step with a batched form: per example ("exact") against the batch ("batched") ------

BATCHED_STEPS = [name for name in oi.ops.registered_steps() if oi.ops.get_step(name).device]
# Pixel tolerance (on [0, 255]) where the batch sees the pixels the step saw: float rounding.
SAME_PIXELS = 0.01
# After the resize a "distribution" step changes other pixels: the mean difference from the
# step per example stays under this share of the mean change the step makes.
DISTRIBUTION_SHARE = 0.5
# Steps whose noise is drawn on the batch, for the batch: not the noise of the host step.
BATCH_NOISE = {"random_patch_gaussian"}
# Warps the exact order folds into the final resize (one matrix): boxes rounded differently.
FOLDED_BOXES = 1e-6
TO_SIZE = [("resize_image", {"new_height": SIZE[0], "new_width": SIZE[1]})]


def _step(name):
    spec = oi.ops.get_step(name)
    params = dict(spec.demo_params)
    if name == "autoaugment_image":
        params["policy_name"] = "v3"  # v0 has box-wise ops, which stay on the host
    return spec, [(name, params)]


def _assert_same_annotations(batched, exact, box_tolerance=0.0):
    assert fields.DEVICE_PARAMETERS not in batched and set(batched) == set(exact)
    for key in set(exact) - {fields.IMAGE}:
        if key == fields.BOXES and box_tolerance:
            np.testing.assert_allclose(batched[key], exact[key], atol=box_tolerance)
        else:
            np.testing.assert_array_equal(batched[key], exact[key], err_msg=key)


@pytest.mark.slow
@pytest.mark.parametrize("name", BATCHED_STEPS)
def test_batched_step_is_the_step_when_it_sees_the_output_size(synthetic_dir, name):
    # Resized to the output size first, the final resize is an identity: the batch stage gets
    # the very pixels the step got, so its draws and pixels must be the step's.
    _, step = _step(name)
    exact = first_batch(synthetic_dir, [*TO_SIZE, *step], trailing_steps="exact")
    batched = first_batch(synthetic_dir, [*TO_SIZE, *step])
    _assert_same_annotations(batched, exact)
    before = first_batch(synthetic_dir, TO_SIZE)[fields.IMAGE].numpy()
    assert np.abs(exact[fields.IMAGE].numpy() - before).mean() > 0.5, "the step did nothing"
    if name in BATCH_NOISE:
        return
    np.testing.assert_allclose(batched[fields.IMAGE], exact[fields.IMAGE], atol=SAME_PIXELS)


@pytest.mark.slow
@pytest.mark.parametrize("name", BATCHED_STEPS)
def test_batched_step_after_the_resize_keeps_annotations_and_the_pixel_distribution(
    synthetic_dir, name
):
    spec, step = _step(name)
    exact = first_batch(synthetic_dir, [*CROP, *step], trailing_steps="exact")
    batched = first_batch(synthetic_dir, [*CROP, *step])
    folded = spec.output_size is not None
    _assert_same_annotations(batched, exact, FOLDED_BOXES if folded else 0.0)
    if name in BATCH_NOISE:
        return
    difference = np.abs(batched[fields.IMAGE].numpy() - exact[fields.IMAGE].numpy())
    if spec.device.fidelity == "exact":
        assert difference.max() <= SAME_PIXELS
        return
    change = np.abs(exact[fields.IMAGE].numpy() - first_batch(synthetic_dir, CROP)[fields.IMAGE])
    assert difference.mean() < DISTRIBUTION_SHARE * change.mean()


@pytest.mark.slow
def test_batched_output_dtype_and_static_batches(synthetic_dir):
    steps = [*CROP, *HEAVY]
    batched = first_batch(synthetic_dir, steps)
    for options in ({"output_dtype": "uint8"}, {"batching": "static"}):
        got = first_batch(synthetic_dir, steps, **options)
        _assert_same_annotations(
            got, first_batch(synthetic_dir, steps, trailing_steps="exact", **options)
        )
        if "output_dtype" in options:
            assert got[fields.IMAGE].dtype == tf.uint8
            np.testing.assert_array_equal(
                got[fields.IMAGE], tf.cast(tf.round(batched[fields.IMAGE]), tf.uint8)
            )
        else:
            assert got[fields.IMAGE].shape == (6, *SIZE, 3)
            np.testing.assert_array_equal(got[fields.IMAGE], batched[fields.IMAGE])


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"group_by_aspect_ratio": True}, marks=pytest.mark.slow),
        pytest.param({"on_error": "skip"}, marks=pytest.mark.slow),
        {"keras": True},
        pytest.param(
            {"augment": [("mosaic", {"output_size": SIZE}), *HEAVY]}, marks=pytest.mark.slow
        ),
    ],
)
def test_batched_runs_with_the_pipeline_options_and_keeps_the_annotations(synthetic_dir, options):
    options = dict(options)
    steps = options.pop("augment", HEAVY)
    batched = first_batch(synthetic_dir, steps, **options)
    exact = first_batch(synthetic_dir, steps, trailing_steps="exact", **options)
    if options.get("keras"):
        # The parameters were consumed on the batch: the model gets the images alone.
        images, targets = batched
        assert images.dtype == tf.float32 and images.shape == (6, *SIZE, 3)
        np.testing.assert_array_equal(targets["boxes"], exact[1]["boxes"])
        return
    _assert_same_annotations(batched, exact)
    assert not np.array_equal(batched[fields.IMAGE], exact[fields.IMAGE])


def test_unbatched_pipelines_run_the_steps_per_example(synthetic_dir):
    batched = first_batch(synthetic_dir, HEAVY, batch_size=None)
    exact = first_batch(synthetic_dir, HEAVY, batch_size=None, trailing_steps="exact")
    assert fields.DEVICE_PARAMETERS not in batched
    for key in exact:
        np.testing.assert_array_equal(batched[key], exact[key], err_msg=key)


# --- which steps the batch gets when a warp can take the resize -------------------------------

FLIP = ("random_horizontal_flip", {})
ROTATION = ("random_rotation", {"max_angle": 20.0})
BRIGHTNESS = ("random_adjust_brightness", {})
MOSAIC = ("mosaic", {"output_size": SIZE})


def _batched_steps(steps, trailing_steps="batched", image_size=SIZE):
    """The names of the steps whose pixels a pipeline of ``steps`` changes on the batch."""
    from types import SimpleNamespace

    from object_input.per_example import plan

    example = plan(
        SimpleNamespace(can_defer=False),
        oi.ops.Augmentation(steps),
        None,
        seed=3,
        shard_index=0,
        image_size=image_size,
        pad_image_size=None,
        batched=True,
        trailing_steps=trailing_steps,
        output_dtype=None,
        max_boxes=None,
        box_overflow="error",
    )
    return None if example.trailing is None else example.trailing.names


def test_a_warp_after_a_step_of_the_output_size_takes_the_resize_per_example():
    # The resize after Mosaic at the output size is an identity: the warp stays per example
    # with it (and with the steps before it); the batch gets the steps after the warp.
    assert _batched_steps([MOSAIC, ROTATION, FLIP, BRIGHTNESS]) == (FLIP[0], BRIGHTNESS[0])
    assert _batched_steps([MOSAIC, FLIP, ROTATION, BRIGHTNESS]) == (BRIGHTNESS[0],)
    assert _batched_steps([MOSAIC, FLIP, ROTATION]) is None
    assert _batched_steps([MOSAIC, FLIP, BRIGHTNESS]) == (FLIP[0], BRIGHTNESS[0])
    yolo = recipes.yolo(SIZE[0])
    after = [name for name, _ in yolo][[name for name, _ in yolo].index("random_affine") + 1 :]
    assert _batched_steps(yolo, image_size=(SIZE[0], SIZE[0])) == tuple(after)


def test_steps_dearer_on_the_batch_stay_per_example_on_the_host_and_move_to_the_device():
    # Equalize, autocontrast and patch gaussian cost the host CPU more batched than per example:
    # the batched default keeps them (and what precedes them) per example; "device" moves them.
    for step in ("random_equalize", "random_autocontrast", "random_patch_gaussian"):
        assert _batched_steps([ROTATION, (step, {}), FLIP]) == (FLIP[0],), step
        assert _batched_steps([ROTATION, (step, {})]) is None, step
        moved = _batched_steps([ROTATION, (step, {}), FLIP], "device")
        assert moved == (ROTATION[0], step, FLIP[0]), step


def test_a_warp_after_a_step_of_another_size_stays_on_the_batch():
    # A real resize would round the folded warp's boxes differently from the batch's.
    whole = (ROTATION[0], FLIP[0], BRIGHTNESS[0])
    assert _batched_steps([*CROP, ROTATION, FLIP, BRIGHTNESS]) == whole
    other = ("mosaic", {"output_size": (SIZE[0] + 8, SIZE[1])})
    assert _batched_steps([other, ROTATION, FLIP, BRIGHTNESS]) == whole
    assert _batched_steps([ROTATION, FLIP, BRIGHTNESS]) == whole
    # The training device takes every trailing step, the warp included.
    assert _batched_steps([MOSAIC, ROTATION, FLIP, BRIGHTNESS], "device") == whole


@pytest.mark.slow
def test_yolo_recipe_batched_keeps_the_annotations_of_the_exact_order(synthetic_dir):
    steps = recipes.yolo(SIZE[0])
    options = {"image_size": (SIZE[0], SIZE[0])}
    batched = first_batch(synthetic_dir, steps, **options)
    exact = first_batch(synthetic_dir, steps, trailing_steps="exact", **options)
    _assert_same_annotations(batched, exact)
    # The same warp and the same colour draws: the batch's colour rounds differently.
    difference = np.abs(batched[fields.IMAGE].numpy() - exact[fields.IMAGE].numpy())
    assert difference.mean() < 0.5


def test_a_colour_pass_after_a_step_is_compiled_with_it_and_gives_its_pixels():
    from object_input.ops import _device_stage as device_stage

    augment = [("random_sharpness", {"probability": 1.0, "factor_range": (0.3, 1.7)})]
    stage = device_stage.DeviceStage.required([*augment, "random_adjust_brightness"], "test")
    rng = np.random.default_rng(5)
    images = tf.constant(rng.uniform(0, 255, (2, 9, 7, 3)), tf.float32)
    parameters = tf.constant([[1.0, 0.4, 0.1], [1.0, 1.6, -0.2]])
    with mock.patch.dict(device_stage._COMPILED, clear=True):
        joined = stage(images, parameters, dtype="uint8", compiled=True)
        # One function: sharpness, then the colour pass, to uint8; keyed without the tunable
        # factor range and probability, which only the draw reads.
        ((step, params, colour, dtype),) = device_stage._COMPILED
    assert step is oi.ops.get_step("random_sharpness").device
    assert (params, dtype) == ("[]", tf.uint8) and "random_adjust_brightness" in colour
    apart = stage(images, parameters, dtype="uint8")
    assert joined.dtype == tf.uint8
    # Rounding to uint8 may land on either side of a half where float sums differ.
    difference = np.abs(joined.numpy().astype(int) - apart.numpy().astype(int))
    assert difference.max() <= 1 and difference.mean() < 0.01
    changed = np.abs(joined.numpy().astype(int) - np.round(images.numpy()).astype(int))
    assert changed.mean() > 5, "neither step changed the pixels"
