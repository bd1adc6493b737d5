"""Keras 3 layouts: detection targets, the dict layout both ways, Keras layers as steps."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from object_input import boxes, fields, keras_layout, ops
from object_input.inspection import verify_files
from object_input.ops import ConfigError
from object_input.ops.compose import Augmentation


def padded_batch():
    """Two examples: a 4x8 image with 2 boxes, a 2x4 image (padded to 4x8) with 1 box."""
    return {
        fields.IMAGE: tf.zeros([2, 4, 8, 3], tf.uint8),
        fields.IMAGE_SHAPE: tf.constant([[4, 8], [2, 4]]),
        fields.BOXES: tf.constant(
            [[[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0]], [[0.0, 0.0, 1.0, 1.0], [0, 0, 0, 0]]]
        ),
        fields.CLASSES: tf.constant([[1, 3], [2, 0]]),
        fields.NUM_BOXES: tf.constant([2, 1]),
    }


def test_detection_targets_in_pixels_with_padding_labelled_minus_one():
    images, targets = keras_layout.to_keras_detection(padded_batch(), "xyxy")
    assert images.shape == (2, 4, 8, 3)
    np.testing.assert_array_equal(
        targets["boxes"].numpy(),
        [[[0, 0, 4, 2], [4, 2, 8, 4]], [[0, 0, 4, 2], [0, 0, 0, 0]]],
    )
    np.testing.assert_array_equal(targets["labels"].numpy(), [[0, 2], [1, -1]])


def test_relative_detection_targets_count_in_the_padded_image():
    # The second image's content is 2x4 inside a 4x8 canvas: its full box covers a quarter.
    _, targets = keras_layout.to_keras_detection(padded_batch(), "rel_xyxy")
    np.testing.assert_allclose(
        targets["boxes"].numpy(),
        [[[0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1]], [[0, 0, 0.5, 0.5], [0, 0, 0, 0]]],
    )


@pytest.mark.parametrize("fmt", boxes.FORMATS)
def test_detection_targets_in_every_format(fmt):
    batch = padded_batch()
    _, targets = keras_layout.to_keras_detection(batch, fmt)
    pixels = boxes.convert(targets["boxes"], fmt, "yxyx", image_shape=(4, 8))
    expected = boxes.convert(batch[fields.BOXES], "rel_yxyx", "yxyx", [[4, 8], [2, 4]])
    valid = np.array([[True, True], [True, False]])
    np.testing.assert_allclose(pixels.numpy()[valid], expected.numpy()[valid], atol=1e-5)
    assert (targets["boxes"].numpy()[~valid] == 0).all()


def test_keras_true_keeps_boxes_and_classes():
    _, targets = keras_layout.keras_output(True)(padded_batch())
    assert sorted(targets) == ["boxes", "classes"]
    np.testing.assert_array_equal(targets["classes"].numpy(), [[1, 3], [2, -1]])
    np.testing.assert_array_equal(targets["boxes"].numpy(), padded_batch()[fields.BOXES].numpy())


def test_no_keras_output_without_keras():
    assert keras_layout.keras_output(False) is None


@pytest.mark.parametrize(
    ("keras", "fmt", "message"),
    [
        ("detection", None, "keras='detection' needs bounding_box_format"),
        (True, "xyxy", "bounding_box_format applies to keras='detection' only"),
        ("detect", None, "keras must be one of"),
        (1, None, "keras must be one of"),
        ("detection", "xyxz", "unknown box format 'xyxz'"),
    ],
)
def test_bad_keras_options_are_named(keras, fmt, message):
    with pytest.raises(ValueError, match=message):
        keras_layout.keras_output(keras, fmt)


def example():
    """A 4x8 image, two boxes with weights, the second in the right half."""
    return {
        fields.IMAGE: tf.reshape(tf.range(4 * 8 * 3, dtype=tf.int32) % 256, [4, 8, 3]),
        fields.BOXES: tf.constant([[0.0, 0.0, 0.5, 0.25], [0.5, 0.5, 1.0, 1.0]]),
        fields.CLASSES: tf.constant([1, 2]),
        fields.WEIGHTS: tf.constant([0.5, 1.0]),
    }


def test_keras_dict_round_trip():
    features = example()
    data = keras_layout.to_keras_dict(features, "xyxy")
    np.testing.assert_array_equal(
        data["bounding_boxes"]["boxes"].numpy(), [[0, 0, 2, 2], [4, 2, 8, 4]]
    )
    np.testing.assert_array_equal(data["bounding_boxes"]["labels"].numpy(), [0, 1])
    back = keras_layout.from_keras_dict(data, "xyxy", features)
    for name in (fields.BOXES, fields.CLASSES, fields.WEIGHTS, fields.IMAGE):
        np.testing.assert_array_equal(back[name].numpy(), features[name].numpy())
    np.testing.assert_array_equal(back[fields.IMAGE_SHAPE].numpy(), [4, 8])


def test_rows_labelled_minus_one_leave_with_every_per_box_field():
    data = {
        "images": tf.zeros([4, 8, 3]),
        "bounding_boxes": {"boxes": [[0, 0, 2, 2], [0, 0, 0, 0]], "labels": [4, -1]},
    }
    out = keras_layout.from_keras_dict(data, "xyxy", {fields.WEIGHTS: tf.constant([0.5, 1.0])})
    np.testing.assert_array_equal(out[fields.BOXES].numpy(), [[0, 0, 0.5, 0.25]])
    np.testing.assert_array_equal(out[fields.CLASSES].numpy(), [5])
    np.testing.assert_array_equal(out[fields.WEIGHTS].numpy(), [0.5])


def test_the_dict_layout_takes_one_example():
    with pytest.raises(ValueError, match=r"one example \(images \[H, W, C\]\)"):
        keras_layout.from_keras_dict(
            {"images": tf.zeros([2, 4, 8, 3]), "bounding_boxes": {"boxes": [], "labels": []}},
            "xyxy",
        )
    with pytest.raises(ValueError, match="to_keras_dict takes one example"):
        keras_layout.to_keras_dict(padded_batch(), "xyxy")


def test_object_input_steps_on_the_keras_layout_in_a_dataset_map():
    flip = keras_layout.on_keras_layout([("random_horizontal_flip", {"probability": 1.0})], "xyxy")
    data = keras_layout.to_keras_dict(example(), "xyxy")
    dataset = tf.data.Dataset.from_tensors(data).map(lambda d: flip(d, seed=tf.constant([1, 2])))
    out = next(iter(dataset))
    assert sorted(out) == ["bounding_boxes", "images"]
    np.testing.assert_array_equal(
        out["bounding_boxes"]["boxes"].numpy(), [[6, 0, 8, 2], [0, 2, 4, 4]]
    )
    np.testing.assert_array_equal(out["bounding_boxes"]["labels"].numpy(), [0, 1])
    np.testing.assert_array_equal(out["images"].numpy(), data["images"].numpy()[:, ::-1])


HORIZONTAL_FLIP = [[0.0, 0.75, 0.5, 1.0], [0.5, 0.0, 1.0, 0.5]]


def test_a_seeded_keras_flip_moves_image_boxes_and_masks_together():
    layer = keras.layers.RandomFlip("horizontal", bounding_box_format="xyxy", seed=1)
    features = example()
    features[fields.MASKS] = tf.constant(
        np.stack([np.eye(4, 8, dtype=np.uint8), np.ones([4, 8], np.uint8)])
    )
    outcomes = set()
    for seed in range(8):
        out = ops.keras_layer(features, seed=tf.constant([seed, 0]), layer=layer)
        flipped = bool((out[fields.IMAGE].numpy() != features[fields.IMAGE].numpy()).any())
        outcomes.add(flipped)
        source = {k: v.numpy() for k, v in features.items()}
        expected_boxes = HORIZONTAL_FLIP if flipped else source[fields.BOXES]
        np.testing.assert_allclose(out[fields.BOXES].numpy(), expected_boxes)
        mirror = (lambda a: a[..., ::-1]) if flipped else (lambda a: a)
        np.testing.assert_array_equal(out[fields.MASKS].numpy(), mirror(source[fields.MASKS]))
        np.testing.assert_array_equal(
            out[fields.IMAGE].numpy(),
            source[fields.IMAGE][:, ::-1] if flipped else source[fields.IMAGE],
        )
        assert out[fields.IMAGE].dtype == tf.int32 and out[fields.MASKS].dtype == tf.uint8
        np.testing.assert_array_equal(out[fields.WEIGHTS].numpy(), [0.5, 1.0])
    assert outcomes == {True, False}
    # The same step seed gives the same draw, whatever the layer's own generator did meanwhile.
    first = ops.keras_layer(features, seed=tf.constant([0, 0]), layer=layer)
    layer(np.zeros([2, 2, 3], np.float32))
    again = ops.keras_layer(features, seed=tf.constant([0, 0]), layer=layer)
    np.testing.assert_array_equal(first[fields.BOXES].numpy(), again[fields.BOXES].numpy())


def test_a_keras_layer_that_pushes_a_box_out_drops_it_with_its_fields():
    layer = keras.layers.RandomTranslation(
        height_factor=(0.5, 0.5), width_factor=0.0, fill_mode="constant", bounding_box_format="xyxy"
    )
    augment = Augmentation([("keras_layer", {"layer": layer})])
    dataset = tf.data.Dataset.from_tensors(example()).map(
        lambda f: augment(f, seed=tf.constant([1, 2])), num_parallel_calls=2
    )
    out = next(iter(dataset))
    np.testing.assert_array_equal(out[fields.BOXES].numpy(), [[0.5, 0.0, 1.0, 0.25]])
    np.testing.assert_array_equal(out[fields.CLASSES].numpy(), [1])
    np.testing.assert_array_equal(out[fields.WEIGHTS].numpy(), [0.5])
    assert (out[fields.IMAGE].numpy()[:2] == 0).all()


def test_keras_layer_errors_are_named():
    with pytest.raises(ConfigError, match="'random_flip_x' has no bounding_box_format"):
        ops.keras_layer(example(), layer=keras.layers.RandomFlip(name="random_flip_x"))
    with pytest.raises(ConfigError, match="is not a Keras 3 image preprocessing layer"):
        ops.keras_layer(example(), layer=keras.layers.Dense(2, name="dense_x"))
    features = dict(example(), keypoints=tf.zeros([2, 1, 2]))
    layer = keras.layers.RandomFlip(bounding_box_format="xyxy", name="flip_k")
    with pytest.raises(ConfigError, match="layer 'flip_k' cannot move keypoints"):
        ops.keras_layer(features, layer=layer)


def test_a_keras_layer_is_a_step_by_itself():
    layer = keras.layers.RandomFlip("horizontal", bounding_box_format="yxyx")
    direct = Augmentation([layer, "random_adjust_contrast"])
    named = Augmentation([("keras_layer", {"layer": layer}), "random_adjust_contrast"])
    assert direct.names() == named.names() == ["keras_layer", "random_adjust_contrast"]
    for seed in ([0, 0], [3, 1]):
        a, b = direct(example(), seed=tf.constant(seed)), named(example(), seed=tf.constant(seed))
        np.testing.assert_array_equal(a[fields.BOXES].numpy(), b[fields.BOXES].numpy())
        np.testing.assert_array_equal(a[fields.IMAGE].numpy(), b[fields.IMAGE].numpy())


def test_unbatched_keras_outputs(synthetic_dir):
    import object_input as oi

    options = dict(batch_size=None, shuffle=False)
    plain = oi.make_dataset(str(synthetic_dir), **options)
    keras_pairs = oi.make_dataset(
        str(synthetic_dir), keras="detection", bounding_box_format="rel_xyxy", **options
    )
    total = 0
    for features, (image, targets) in zip(plain.take(6), keras_pairs.take(6), strict=True):
        assert image.shape.rank == 3
        expected = boxes.convert(features[fields.BOXES], "rel_yxyx", "rel_xyxy")
        np.testing.assert_allclose(targets["boxes"].numpy(), expected.numpy(), rtol=1e-6)
        np.testing.assert_array_equal(targets["labels"].numpy(), features[fields.CLASSES] - 1)
        total += len(targets["labels"])
    assert total > 0


def _class_folders(root, per_class):
    from object_input.converters import convert_folders

    for name, count in per_class.items():
        (root / "flowers" / name).mkdir(parents=True)
        for i in range(count):
            image = np.full((6, 8, 3), 10 * i, np.uint8)
            (root / "flowers" / name / f"{i}.png").write_bytes(tf.io.encode_png(image).numpy())
    return convert_folders(
        str(root / "flowers"), str(root / "out/train"), progress=False, shuffle=False
    )


def test_class_folders_feed_a_classifier(tmp_path):
    import object_input as oi

    result = _class_folders(tmp_path, {"daisy": 3, "rose": 2})
    options = dict(image_size=(8, 8), shuffle=False, keras="classification")
    dataset = oi.make_dataset(result.pattern, batch_size=4, **options)
    assert dataset.element_spec[1] == tf.TensorSpec([None], tf.int32)
    assert [labels.numpy().tolist() for _, labels in dataset] == [[0, 0, 0, 1], [1]]
    unbatched = oi.make_dataset(result.pattern, batch_size=None, **options)
    assert [int(label) for _, label in unbatched] == [0, 0, 0, 1, 1]
    model = keras.Sequential(
        [keras.Input((8, 8, 3)), keras.layers.Flatten(), keras.layers.Dense(2, "softmax")]
    )
    model.compile("sgd", "sparse_categorical_crossentropy")
    # Verified records give the dataset its length: Keras does not run out of data.
    assert verify_files(result.pattern).ok
    dataset = oi.make_dataset(result.pattern, batch_size=4, **options)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "Your input ran out of data")
        history = model.fit(dataset, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2


def test_classification_needs_one_image_class_per_image(tmp_path):
    import object_input as oi
    from object_input.writers import build_example, write_tfrecords

    image = np.zeros((4, 4, 3), np.uint8)
    records = [
        build_example(image, image_classes=[2], source_id="one"),
        build_example(image, image_classes=[1, 2], source_id="two"),
    ]
    (path,) = write_tfrecords(records, str(tmp_path / "c"))
    dataset = oi.make_dataset(path, batch_size=2, shuffle=False, keras="classification")
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=rf"record {path}:1: 2 image_classes; keras classification takes one per image",
    ):
        list(dataset)
