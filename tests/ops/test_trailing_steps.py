"""make_dataset's trailing_steps for colour ("batched", "exact", "device") and JPEG DCT scaling."""

import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input import fields
from object_input.keras.layers import DeviceAugmentation

GEOMETRY = [("random_horizontal_flip", {}), ("random_crop_image", {"min_object_covered": 0.0})]
COLOR = [
    "random_adjust_brightness",
    "random_adjust_contrast",
    "random_adjust_hue",
    "random_adjust_saturation",
]
SIZE = (40, 48)


def first_batch(directory, steps, **options):
    options = {"batch_size": 6, "image_size": SIZE, "max_boxes": 8, "seed": 3, **options}
    return next(iter(oi.make_dataset(directory, augment=steps, **options)))


@pytest.mark.slow
def test_batched_equals_exact_when_the_color_already_sees_the_output_size(synthetic_dir):
    # resize_image to the output size before the colour: the final resize is then an identity,
    # so the exact order and the batched colour the same pixels.
    steps = [*GEOMETRY, ("resize_image", {"new_height": SIZE[0], "new_width": SIZE[1]}), *COLOR]
    exact = first_batch(synthetic_dir, steps, trailing_steps="exact")
    batched = first_batch(synthetic_dir, steps)
    assert fields.DEVICE_PARAMETERS not in batched
    assert batched[fields.IMAGE].dtype == tf.float32
    np.testing.assert_allclose(batched[fields.IMAGE], exact[fields.IMAGE], atol=1e-3)
    np.testing.assert_array_equal(batched[fields.BOXES], exact[fields.BOXES])
    uncolored = first_batch(synthetic_dir, steps[:3])[fields.IMAGE]
    assert np.abs(batched[fields.IMAGE] - uncolored).max() > 1


def test_batched_differs_from_exact_by_interpolation_only(synthetic_dir):
    exact = first_batch(synthetic_dir, [*GEOMETRY, *COLOR], trailing_steps="exact")
    batched = first_batch(synthetic_dir, [*GEOMETRY, *COLOR])
    np.testing.assert_array_equal(batched[fields.BOXES], exact[fields.BOXES])
    difference = np.abs(batched[fields.IMAGE].numpy() - exact[fields.IMAGE].numpy())
    assert 0 < np.median(difference) < 1.0


@pytest.mark.parametrize("dtype", [pytest.param("uint8", marks=pytest.mark.slow), "bfloat16"])
def test_batched_output_dtype_is_its_float_color_cast(synthetic_dir, dtype):
    steps = [*GEOMETRY, *COLOR]
    color = first_batch(synthetic_dir, steps)[fields.IMAGE]
    got = first_batch(synthetic_dir, steps, output_dtype=dtype)[fields.IMAGE]
    assert got.dtype == tf.as_dtype(dtype)
    if dtype == "uint8":
        np.testing.assert_array_equal(got, tf.cast(tf.round(color), tf.uint8))
    else:
        np.testing.assert_array_equal(
            tf.bitcast(got, tf.uint16), tf.bitcast(tf.cast(color, tf.bfloat16), tf.uint16)
        )


@pytest.mark.slow
def test_device_stage_defers_the_color_to_the_layer(synthetic_dir):
    steps = [*GEOMETRY, *COLOR]
    device = first_batch(synthetic_dir, steps, trailing_steps="device", output_dtype="uint8")
    batched = first_batch(synthetic_dir, steps)
    geometry_only = first_batch(synthetic_dir, GEOMETRY, output_dtype="uint8")
    # Removing trailing steps leaves the earlier draws alone: the images are those uncoloured.
    np.testing.assert_array_equal(device[fields.IMAGE], geometry_only[fields.IMAGE])
    parameters = device[fields.DEVICE_PARAMETERS].numpy()
    assert parameters.shape == (6, 4)
    assert len(set(parameters[:, 2].tolist())) == 6  # one hue delta per image
    assert np.all(np.abs(parameters[:, 0]) <= 0.2) and np.all(np.abs(parameters[:, 2]) <= 0.02)
    layer = DeviceAugmentation(steps)
    colored = layer((device[fields.IMAGE], device[fields.DEVICE_PARAMETERS]))
    # The batched pipeline coloured from float pixels; the device batch was rounded to uint8 first.
    np.testing.assert_allclose(colored, batched[fields.IMAGE], atol=2.0)


def test_device_stage_for_keras_gives_images_and_parameters(synthetic_dir):
    inputs, targets = first_batch(
        synthetic_dir, [*GEOMETRY, *COLOR], trailing_steps="device", keras=True
    )
    images, parameters = inputs
    assert images.shape == (6, *SIZE, 3) and parameters.shape == (6, 4)
    assert set(targets) == {"boxes", "classes"}


@pytest.mark.slow
def test_when_the_last_step_has_no_batched_form_nothing_moves(synthetic_dir):
    steps = [*COLOR, *GEOMETRY]
    batched = first_batch(synthetic_dir, steps)
    exact = first_batch(synthetic_dir, steps, trailing_steps="exact")
    assert fields.DEVICE_PARAMETERS not in batched
    np.testing.assert_array_equal(batched[fields.IMAGE], exact[fields.IMAGE])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"trailing_steps": "gpu"},
            r"trailing_steps must be one of \('batched', 'exact', 'device'\)",
        ),
        (
            {"trailing_steps": "device", "image_size": None},
            "trailing_steps='device' needs image_size",
        ),
        ({"trailing_steps": "device", "batch_size": None}, "and batch_size"),
    ],
)
def test_bad_trailing_steps_options(synthetic_dir, options, message):
    with pytest.raises(ValueError, match=message):
        oi.make_dataset(synthetic_dir, **{"batch_size": 2, "image_size": SIZE, **options})


def test_jpeg_dct_scaling_changes_pixels_only(tmp_path):
    from object_input.writers.synthetic import write_synthetic_dataset

    write_synthetic_dataset(tmp_path, 8, 1, sizes=((96, 128),), image_format="jpeg", seed=2)
    steps = [("random_crop_image", {"min_object_covered": 0.0, "area_range": (0.5, 1.0)})]
    options = {"batch_size": 8, "image_size": (16, 16), "max_boxes": 8, "seed": 1}
    exact = first_batch(tmp_path, steps, **options)
    scaled = first_batch(tmp_path, steps, decoding={"jpeg_dct_scaling": True}, **options)
    np.testing.assert_array_equal(scaled[fields.BOXES], exact[fields.BOXES])
    difference = np.abs(scaled[fields.IMAGE].numpy() - exact[fields.IMAGE].numpy())
    assert 0 < difference.mean() < 20
