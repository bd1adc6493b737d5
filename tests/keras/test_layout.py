"""Keras 3 layouts: detection targets, the dict layout both ways, Keras layers as steps."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from object_input import box_formats as boxes
from object_input import fields, ops
from object_input.keras import layout as keras_layout
from object_input.label_map import write_label_map
from object_input.ops import ConfigError
from object_input.ops._compose import Augmentation
from object_input.verification.verify import verify_files


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_class_folders_feed_a_classifier(tmp_path):
    import object_input as oi

    result = _class_folders(tmp_path, {"daisy": 3, "rose": 2})
    options = dict(image_size=(8, 8), shuffle=False, keras="classification")
    dataset = oi.make_dataset(result.pattern, batch_size=4, **options)
    assert dataset.class_names == ["daisy", "rose"]
    assert dataset.element_spec[1] == tf.TensorSpec([None], tf.int32)
    assert [labels.numpy().tolist() for _, labels in dataset] == [[0, 0, 0, 1], [1]]
    unbatched = oi.make_dataset(result.pattern, batch_size=None, **options)
    assert [int(label) for _, label in unbatched] == [0, 0, 0, 1, 1]
    model = keras.Sequential(
        [keras.Input((8, 8, 3)), keras.layers.Flatten(), keras.layers.Dense(2, "softmax")]
    )
    model.compile("sgd", "sparse_categorical_crossentropy")
    history = model.fit(dataset, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2


@pytest.mark.slow
def test_image_classes_with_gaps_become_labels_of_the_label_map(tmp_path):
    import object_input as oi
    from object_input.writers import build_example, write_tfrecords

    image = np.zeros((4, 4, 3), np.uint8)
    records = [build_example(image, image_classes=[c], source_id=str(c)) for c in (7, 2, 9)]
    (path,) = write_tfrecords(records, str(tmp_path / "c"))
    write_label_map(tmp_path / "label_map.pbtxt", {"tulip": 9, "daisy": 2, "rose": 7})
    dataset = oi.make_dataset(path, batch_size=3, shuffle=False, keras="classification")
    assert dataset.class_names == ["daisy", "rose", "tulip"]
    ((_, labels),) = list(dataset)
    assert labels.numpy().tolist() == [1, 0, 2]
    write_label_map(tmp_path / "label_map.pbtxt", {"daisy": 2, "rose": 7})
    dataset = oi.make_dataset(path, batch_size=None, shuffle=False, keras="classification")
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=re.escape(f"record {path}:2: class id 9 is not in the label map {tmp_path}"),
    ):
        list(dataset)


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


# Label spaces: COCO's ids have gaps (80 classes, ids 1..90); Keras labels must be 0..C-1.
SPARSE = {"person": 1, "car": 3, "toothbrush": 90}


def sparse_batch():
    """Two records: classes 90 and 1, and 3 with a padded row (class 0)."""
    return {
        **padded_batch(),
        fields.CLASSES: tf.constant([[90, 1], [3, 0]]),
        fields.RECORD_ID: tf.constant(["a.tfrecord:0", "a.tfrecord:1"]),
    }


def test_a_label_map_with_gaps_gives_dense_labels_in_id_order():
    classes = keras_layout.LabelSpace.of(SPARSE)
    assert classes.names == ("person", "car", "toothbrush") and classes.ids == (1, 3, 90)
    _, targets = keras_layout.keras_output("detection", "xyxy", classes)(sparse_batch())
    np.testing.assert_array_equal(targets["labels"].numpy(), [[2, 0], [1, -1]])
    # keras=True keeps object_input's own layout: the class ids as stored.
    _, targets = keras_layout.keras_output(True, None, classes)(sparse_batch())
    np.testing.assert_array_equal(targets["classes"].numpy(), [[90, 1], [3, -1]])


def test_the_lookup_compiles_with_xla():
    classes = keras_layout.LabelSpace.of(SPARSE)
    lookup = tf.function(classes.labels, jit_compile=True)
    ids = tf.constant([[90, 1, 2], [3, 91, -5]])
    np.testing.assert_array_equal(lookup(ids).numpy(), [[2, 0, -1], [1, -1, -1]])


@pytest.mark.parametrize(
    ("stored", "label_map", "message"),
    [
        (
            2,
            SPARSE,
            "record a.tfrecord:1: class id 2 is not in the label map label_map={...} "
            "(3 classes, Keras labels 0..2)",
        ),
        (91, SPARSE, "record a.tfrecord:1: class id 91 is not in the label map label_map="),
        (0, SPARSE, "record a.tfrecord:1: class id 0 is not in the label map label_map="),
        (
            0,
            None,
            "record a.tfrecord:1: class id 0 is below 1: ids start at 1, and without a label "
            "map a Keras label is class id - 1",
        ),
    ],
)
def test_a_class_outside_the_label_map_is_an_error_naming_record_and_map(
    stored, label_map, message
):
    batch = sparse_batch()
    batch[fields.CLASSES] = tf.constant([[90, 1], [stored, 0]])
    classes = None if label_map is None else keras_layout.LabelSpace.of(label_map)
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(message)):
        keras_layout.to_keras_detection(batch, "xyxy", classes)


def test_a_negative_label_field_is_an_error_naming_the_record():
    batch = {
        fields.IMAGE: tf.zeros([2, 4, 4, 3]),
        fields.LABEL: tf.constant([3, -1]),
        fields.RECORD_ID: tf.constant(["r:0", "r:1"]),
    }
    with pytest.raises(tf.errors.InvalidArgumentError, match="record r:1: label -1 is negative"):
        keras_layout.to_keras_classification(batch)
    names = keras_layout.LabelSpace.stored(["a", "b", "c"], "label names of CIFAR")
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=re.escape("record r:0: label 3 is not in the label names of CIFAR (3 classes"),
    ):
        keras_layout.to_keras_classification(batch, names)
    _, labels = keras_layout.to_keras_classification({**batch, fields.LABEL: [2, 0]}, names)
    assert labels.numpy().tolist() == [2, 0]


def test_the_dict_layout_round_trips_sparse_ids_through_a_label_map_file(tmp_path):
    path = write_label_map(tmp_path / "label_map.pbtxt", SPARSE)
    features = dict(example(), **{fields.CLASSES: tf.constant([90, 3])})
    data = keras_layout.to_keras_dict(features, "xyxy", label_map=path)
    np.testing.assert_array_equal(data["bounding_boxes"]["labels"].numpy(), [2, 1])
    back = keras_layout.from_keras_dict(data, "xyxy", features, label_map=path)
    np.testing.assert_array_equal(back[fields.CLASSES].numpy(), [90, 3])
    np.testing.assert_array_equal(back[fields.BOXES].numpy(), features[fields.BOXES].numpy())
    # Padding rows leave; a label beyond the label map is an error naming it.
    padded = {"images": data["images"], "bounding_boxes": {**data["bounding_boxes"]}}
    padded["bounding_boxes"]["labels"] = tf.constant([0, -1])
    out = keras_layout.from_keras_dict(padded, "xyxy", label_map=SPARSE)
    np.testing.assert_array_equal(out[fields.CLASSES].numpy(), [1])
    padded["bounding_boxes"]["labels"] = tf.constant([3, 0])
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=re.escape(f"label 3 is not in the label map {path} (3 classes, Keras labels 0..2)"),
    ):
        keras_layout.from_keras_dict(padded, "xyxy", label_map=path)
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match="example 0: class id 2 is not in the label map label_map=",
    ):
        keras_layout.to_keras_dict(dict(example(), **{fields.CLASSES: [90, 2]}), "xyxy", SPARSE)


def test_steps_on_the_keras_layout_keep_sparse_classes_through_a_label_map():
    flip = keras_layout.on_keras_layout(
        [("random_horizontal_flip", {"probability": 1.0})], "xyxy", label_map=SPARSE
    )
    data = {
        "images": tf.zeros([4, 8, 3]),
        "bounding_boxes": {"boxes": [[0.0, 0.0, 2.0, 2.0], [0, 0, 0, 0]], "labels": [2, -1]},
    }
    out = flip(data, seed=tf.constant([1, 2]))
    np.testing.assert_array_equal(out["bounding_boxes"]["labels"].numpy(), [2])
    np.testing.assert_array_equal(out["bounding_boxes"]["boxes"].numpy(), [[6, 0, 8, 2]])


def write_sparse_records(folder, label_map=SPARSE):
    """Two records with COCO-like sparse ids (90, 1 and 3) and a label_map.pbtxt beside them,
    as a converter writes it; the records carry ids, no class names."""
    from object_input.writers import build_example, write_tfrecords

    image = np.zeros((8, 8, 3), np.uint8)
    records = [
        build_example(image, boxes=[[0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1]], classes=[90, 1]),
        build_example(image, boxes=[[0, 0, 1, 1]], classes=[3]),
    ]
    (path,) = write_tfrecords(records, str(folder / "train"))
    if label_map is not None:
        write_label_map(folder / "label_map.pbtxt", label_map)
    return path


@pytest.mark.slow
def test_make_dataset_finds_the_label_map_beside_the_files_and_names_the_classes(tmp_path):
    import object_input as oi

    path = write_sparse_records(tmp_path)
    options = dict(batch_size=2, shuffle=False, keras="detection", bounding_box_format="xyxy")
    dataset = oi.make_dataset(path, **options)
    assert dataset.class_names == oi.class_names(dataset) == ["person", "car", "toothbrush"]
    ((_, targets),) = list(dataset)
    np.testing.assert_array_equal(targets["labels"].numpy(), [[2, 0], [1, -1]])
    # A label map given replaces the one beside the files: 90 is not in it.
    dataset = oi.make_dataset(path, label_map={"person": 1, "car": 3}, **options)
    assert dataset.class_names == ["person", "car"]
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=re.escape(f"record {path}:0: class id 90 is not in the label map label_map={{...}}"),
    ):
        list(dataset)
    # The dataset's own class names, whatever its layout.
    assert oi.make_dataset(path, batch_size=None).class_names == ["person", "car", "toothbrush"]
    with pytest.raises(ValueError, match="no class names on this dataset: pass the dataset"):
        oi.class_names(dataset.take(1))


def test_a_discovered_label_map_names_classes_without_changing_decoding(tmp_path):
    from object_input.sources import TFRecord

    path = write_sparse_records(tmp_path)
    assert verify_files(path).ok  # verified without a label map
    source = TFRecord(path)
    assert source.label_map == SPARSE
    assert source.label_map_origin == f"label map {tmp_path / 'label_map.pbtxt'}"
    assert source.decoder.label_map is None and source.verified
    assert source.decoder.settings() == TFRecord(path, label_map=None).decoder.settings()


def test_label_maps_that_disagree_beside_the_files_are_an_error(tmp_path):
    import object_input as oi

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = write_sparse_records(tmp_path / "a")
    second = write_sparse_records(tmp_path / "b", {"person": 1, "car": 2, "toothbrush": 90})
    with pytest.raises(
        ValueError, match=r"label maps that disagree, .*a/label_map\.pbtxt and .*b/"
    ):
        oi.make_dataset([first, second])
    (tmp_path / "b" / "label_map.pbtxt").write_text("item { id: 1 }\n")
    with pytest.raises(ValueError, match=r"has no name \(the label map beside .*; fix it, or pass"):
        oi.make_dataset(second)


def test_without_a_label_map_labels_are_ids_minus_one_and_there_are_no_names(tmp_path):
    import object_input as oi

    path = write_sparse_records(tmp_path, label_map=None)
    dataset = oi.make_dataset(
        path, batch_size=2, shuffle=False, keras="detection", bounding_box_format="xyxy"
    )
    assert not hasattr(dataset, "class_names")
    with pytest.raises(ValueError, match="make_dataset does not know this data's classes"):
        oi.class_names(dataset)
    ((_, targets),) = list(dataset)
    np.testing.assert_array_equal(targets["labels"].numpy(), [[89, 0], [2, -1]])
