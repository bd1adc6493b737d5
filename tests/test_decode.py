"""decode_example: every key of the schema, exact values, defaults and errors."""

import numpy as np
import pytest
import tensorflow as tf

from object_input import decode_example, fields
from object_input.writers import build_example, encode_image

IMAGE = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
BOXES = np.array([[0.0, 0.1, 0.5, 0.6], [0.25, 0.2, 1.0, 0.8]], np.float32)


def _feature(**kv):
    out = {}
    for key, value in kv.items():
        key = key.replace("__", "/")
        if isinstance(value, bytes):
            out[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            out[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=value))
        elif isinstance(value, list) and value and isinstance(value[0], float):
            out[key] = tf.train.Feature(float_list=tf.train.FloatList(value=value))
        else:
            value = value if isinstance(value, list) else [value]
            out[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=value))
    return tf.train.Example(features=tf.train.Features(feature=out)).SerializeToString()


def full_record():
    masks = np.zeros((2, 4, 5), np.uint8)
    masks[0, :2, :3] = 1
    masks[1, 1:, 1:4] = 1
    keypoints = np.array([[[0.1, 0.2], [np.nan, np.nan]], [[0.5, 0.5], [0.9, 0.7]]], np.float32)
    example = build_example(
        IMAGE,
        boxes=BOXES,
        classes=[3, 1],
        class_texts=["dog", "cat"],
        filename="a.png",
        source_id="17",
        weights=[0.5, 1.0],
        area=[10.0, 20.0],
        is_crowd=[0, 1],
        difficult=[1, 0],
        group_of=[0, 1],
        track_ids=[7, 8],
        masks=masks,
        keypoints=keypoints,
        keypoint_visibilities=[[2, 0], [1, 2]],
        multiclass_scores=np.array([[0.1, 0.9], [0.7, 0.3]], np.float32),
        image_classes=[1, 3],
    )
    return example.SerializeToString(), masks


def test_every_schema_key_decodes_exactly():
    serialized, masks = full_record()
    out = decode_example(serialized, masks="png", num_keypoints=2, multiclass_scores=True)
    np.testing.assert_array_equal(out[fields.IMAGE], IMAGE)
    np.testing.assert_array_equal(out[fields.IMAGE_SHAPE], [4, 5])
    assert out[fields.SOURCE_ID].numpy() == b"17"
    assert out[fields.FILENAME].numpy() == b"a.png"
    assert len(out[fields.KEY].numpy()) == 64
    np.testing.assert_array_equal(out[fields.BOXES], BOXES)
    np.testing.assert_array_equal(out[fields.CLASSES], [3, 1])
    assert out[fields.CLASSES].dtype == tf.int32
    np.testing.assert_array_equal(out[fields.WEIGHTS], [0.5, 1.0])
    np.testing.assert_array_equal(out[fields.AREA], [10.0, 20.0])
    np.testing.assert_array_equal(out[fields.IS_CROWD], [False, True])
    np.testing.assert_array_equal(out[fields.DIFFICULT], [True, False])
    np.testing.assert_array_equal(out[fields.GROUP_OF], [False, True])
    np.testing.assert_array_equal(out[fields.TRACK_IDS], [7, 8])
    np.testing.assert_array_equal(out[fields.MASKS], masks)
    assert out[fields.MASKS].dtype == tf.uint8
    kp = out[fields.KEYPOINTS].numpy()
    np.testing.assert_allclose(kp[0, 0], [0.1, 0.2])
    assert np.isnan(kp[0, 1]).all()
    np.testing.assert_allclose(kp[1], [[0.5, 0.5], [0.9, 0.7]])
    np.testing.assert_array_equal(out[fields.KEYPOINT_VISIBILITIES], [[True, False], [True, True]])
    np.testing.assert_allclose(out[fields.MULTICLASS_SCORES], [[0.1, 0.9], [0.7, 0.3]])
    np.testing.assert_array_equal(out[fields.IMAGE_CLASSES], [1, 3])
    assert out[fields.NUM_DROPPED_BOXES].numpy() == 0


def test_numerical_masks_and_jpeg_and_raw_images():
    masks = np.zeros((1, 4, 5), np.float32)
    masks[0, 1, 2] = 0.7
    raw = build_example(
        IMAGE,
        image_format="raw",
        boxes=BOXES[:1],
        classes=[1],
        masks=masks,
        mask_format="numerical",
    )
    out = decode_example(raw.SerializeToString(), masks="numerical")
    np.testing.assert_array_equal(out[fields.IMAGE], IMAGE)
    np.testing.assert_array_equal(out[fields.MASKS], (masks > 0).astype(np.uint8))
    flat = np.full((8, 8, 3), 128, np.uint8)
    jpeg = build_example(flat, image_format="jpeg")
    out = decode_example(jpeg.SerializeToString())
    assert out[fields.IMAGE].shape == (8, 8, 3)
    assert np.abs(out[fields.IMAGE].numpy().astype(int) - 128).max() <= 2


def test_missing_optional_keys_get_defaults():
    serialized = _feature(
        image__encoded=encode_image(IMAGE),
        image__object__bbox__ymin=[0.0, 0.5],
        image__object__bbox__xmin=[0.0, 0.0],
        image__object__bbox__ymax=[0.5, 1.0],
        image__object__bbox__xmax=[0.2, 1.0],
        image__object__class__label=[1, 2],
    )
    out = decode_example(serialized, num_keypoints=3)
    np.testing.assert_array_equal(out[fields.WEIGHTS], [1.0, 1.0])
    np.testing.assert_allclose(out[fields.AREA], [0.5 * 0.2 * 20, 0.5 * 1.0 * 20])
    np.testing.assert_array_equal(out[fields.IS_CROWD], [False, False])
    np.testing.assert_array_equal(out[fields.TRACK_IDS], [-1, -1])
    assert out[fields.KEYPOINTS].shape == (2, 3, 2)
    assert np.isnan(out[fields.KEYPOINTS].numpy()).all()
    assert not out[fields.KEYPOINT_VISIBILITIES].numpy().any()
    assert out[fields.SOURCE_ID].numpy() == b""
    assert out[fields.IMAGE_CLASSES].shape == (0,)


def test_background_image_has_zero_boxes():
    out = decode_example(build_example(IMAGE).SerializeToString(), masks="png", num_keypoints=2)
    assert out[fields.BOXES].shape == (0, 4)
    assert out[fields.CLASSES].shape == (0,)
    assert out[fields.MASKS].shape == (0, 4, 5)
    assert out[fields.KEYPOINTS].shape == (0, 2, 2)


def test_class_text_through_label_map():
    serialized = build_example(IMAGE, boxes=BOXES, classes=[], class_texts=["dog", "cat"])
    out = decode_example(serialized.SerializeToString(), label_map={"cat": 1, "dog": 3})
    np.testing.assert_array_equal(out[fields.CLASSES], [3, 1])


def test_unknown_class_text_errors_or_is_dropped_and_counted():
    serialized = build_example(
        IMAGE, boxes=BOXES, classes=[], class_texts=["cow", "cat"], track_ids=[5, 6]
    ).SerializeToString()
    with pytest.raises(tf.errors.InvalidArgumentError, match="not in the label map"):
        decode_example(serialized, label_map={"cat": 1})
    out = decode_example(serialized, label_map={"cat": 1}, unknown_classes="drop")
    np.testing.assert_array_equal(out[fields.CLASSES], [1])
    np.testing.assert_array_equal(out[fields.TRACK_IDS], [6])
    np.testing.assert_array_equal(out[fields.BOXES], BOXES[1:])
    assert out[fields.NUM_DROPPED_BOXES].numpy() == 1


def test_extra_features_pass_through():
    example = build_example(IMAGE)
    example.features.feature["image/extra/score"].float_list.value.extend([0.25, 0.5])
    out = decode_example(
        example.SerializeToString(),
        extra_features={"image/extra/score": tf.io.VarLenFeature(tf.float32)},
    )
    np.testing.assert_array_equal(out["image/extra/score"], [0.25, 0.5])


def test_missing_image_is_a_clear_error():
    serialized = _feature(image__source_id=b"x1")
    with pytest.raises(tf.errors.InvalidArgumentError, match="image/encoded is missing"):
        decode_example(serialized, record_id="f.tfrecord:3")


def test_non_image_bytes_name_the_record_and_field():
    serialized = _feature(image__encoded=b"this is not an image at all")
    with pytest.raises(tf.errors.InvalidArgumentError) as err:
        decode_example(serialized, record_id="train.tfrecord:12")
    assert "train.tfrecord:12" in str(err.value)
    assert "image/encoded is not a JPEG, PNG" in str(err.value)


def test_unequal_box_lists_name_the_record():
    serialized = _feature(
        image__encoded=encode_image(IMAGE),
        image__object__bbox__ymin=[0.0, 0.5],
        image__object__bbox__xmin=[0.0],
        image__object__bbox__ymax=[0.5, 1.0],
        image__object__bbox__xmax=[0.2, 1.0],
        image__object__class__label=[1, 2],
    )
    with pytest.raises(tf.errors.InvalidArgumentError) as err:
        decode_example(serialized, record_id="r.tfrecord:0")
    assert "r.tfrecord:0" in str(err.value) and "unequal length" in str(err.value)


def test_per_box_list_of_wrong_length_names_the_field():
    serialized = build_example(IMAGE, boxes=BOXES, classes=[1, 2]).SerializeToString()
    example = tf.train.Example.FromString(serialized)
    example.features.feature["image/object/weight"].float_list.value.extend([1.0, 2.0, 3.0])
    with pytest.raises(tf.errors.InvalidArgumentError, match="image/object/weight has"):
        decode_example(example.SerializeToString())


def test_boxes_without_classes_is_an_error():
    serialized = _feature(
        image__encoded=encode_image(IMAGE),
        image__object__bbox__ymin=[0.0],
        image__object__bbox__xmin=[0.0],
        image__object__bbox__ymax=[0.5],
        image__object__bbox__xmax=[0.2],
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="has 1 boxes but 0 classes"):
        decode_example(serialized)


def test_inverted_box_is_an_error():
    serialized = build_example(IMAGE, boxes=[[0.5, 0.1, 0.2, 0.6]], classes=[1])
    with pytest.raises(tf.errors.InvalidArgumentError, match="ymin > ymax"):
        decode_example(serialized.SerializeToString())


def test_decode_in_graph_mode_under_map():
    serialized, _ = full_record()
    ds = tf.data.Dataset.from_tensors(serialized).map(
        lambda s: decode_example(s, masks="png", num_keypoints=2)
    )
    assert ds.element_spec[fields.IMAGE].shape.as_list() == [None, None, 3]
    out = next(iter(ds))
    np.testing.assert_array_equal(out[fields.BOXES], BOXES)


def test_bad_options_fail_at_construction():
    with pytest.raises(ValueError, match="masks must be"):
        decode_example(b"", masks="jpeg")
    with pytest.raises(ValueError, match="channels"):
        decode_example(b"", channels=2)


def test_image_bytes_have_one_signature_table_for_python_and_graph_checks():
    from object_input.decoders import image_files

    png = encode_image(IMAGE, "png")
    samples = {"jpeg": encode_image(IMAGE, "jpeg"), "png": png, "gif": b"GIF89a", "bmp": b"BMxx"}
    for name, data in samples.items():
        assert image_files.image_format(data) == name
        flags = image_files.image_magic(tf.constant(data)).numpy().tolist()
        assert flags == [n == name for n in image_files.SIGNATURES]
    # The graph compares the first 4 bytes: a PNG damaged after them is an image to decode.
    assert bool(image_files.looks_like_image(tf.constant(png[:4] + b"damaged")))
    assert image_files.image_format(png[:4] + b"damaged") is None
    encoded = tf.constant(png)
    size = image_files.header_size(encoded, image_files.image_magic(encoded), None)
    assert size.numpy().tolist() == [4, 5]
    placeholder = tf.io.decode_png(image_files.PLACEHOLDER_PNG)
    assert placeholder.shape == (1, 1, 1)
