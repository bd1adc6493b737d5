"""Decoder validation: each bad-record case raises naming record and field, or gets its code."""

import io

import numpy as np
import pytest
import tensorflow as tf

from object_input import decode_example, fields
from object_input.reliability import errors
from object_input.writers import build_example, encode_image

IMAGE = np.arange(48 * 64 * 3, dtype=np.uint8).reshape(48, 64, 3)
BOX = [[0.1, 0.2, 0.5, 0.6]]


def _example(**kwargs) -> tf.train.Example:
    kwargs.setdefault("boxes", BOX)
    kwargs.setdefault("classes", [1])
    return build_example(kwargs.pop("image", IMAGE), source_id="src-7", **kwargs)


def _set(example: tf.train.Example, key: str, values: list) -> bytes:
    feature = example.features.feature[key]
    feature.Clear()
    if values and isinstance(values[0], bytes):
        feature.bytes_list.value.extend(values)
    elif values and isinstance(values[0], float):
        feature.float_list.value.extend(values)
    else:
        feature.int64_list.value.extend(values)
    return example.SerializeToString()


def _expect(serialized: bytes, reason: str, match: str, **options) -> None:
    """``reason`` under flag, an error naming record, source id and ``match`` under raise."""
    with pytest.raises(tf.errors.InvalidArgumentError) as err:
        decode_example(serialized, "data.tfrecord:5", **options)
    message = str(err.value)
    assert "record data.tfrecord:5 (source_id src-7)" in message, message
    assert match in message, message
    out = decode_example(serialized, "data.tfrecord:5", checks="flag", **options)
    assert errors.reason_of(int(out[fields.ERROR])) == reason
    assert out[fields.ERROR_DETAIL].numpy().decode() in message


def _mask_pngs(height: int, width: int, count: int = 1) -> list[bytes]:
    return [encode_image(np.ones((height, width, 1), np.uint8)) for _ in range(count)]


@pytest.mark.parametrize("shape", [(64, 48), (48, 32)])
def test_mask_of_another_size_is_an_error_even_transposed(shape):
    serialized = _set(_example(), "image/object/mask", _mask_pngs(*shape))
    _expect(serialized, "mask", "image/object/mask holds PNGs of height, width", masks="png")


def test_mask_count_must_match_the_boxes():
    serialized = _set(_example(), "image/object/mask", _mask_pngs(48, 64, 2))
    _expect(serialized, "mask", "image/object/mask has 2 PNGs for 1 boxes", masks="png")
    numerical = _set(_example(), "image/object/mask", [1.0] * (48 * 64 - 1))
    _expect(numerical, "mask", "expected boxes x height x width = 3072", masks="numerical")


def test_good_masks_decode_under_both_policies():
    masks = np.zeros((1, 48, 64), np.uint8)
    masks[0, 3:9, 5:20] = 1
    serialized = _example(masks=masks).SerializeToString()
    for policy in ("raise", "flag"):
        out = decode_example(serialized, masks="png", checks=policy)
        np.testing.assert_array_equal(out[fields.MASKS], masks)
    assert int(out[fields.ERROR]) == errors.OK


@pytest.mark.parametrize("label", [0, -3, 2**32 + 1, 2**31])
def test_class_ids_outside_1_to_2_pow_31_are_errors(label):
    serialized = _set(_example(), "image/object/class/label", [label])
    _expect(serialized, "class_range", f"class ids outside [1, 2**31): [{label}]")


def test_largest_class_id_is_kept_exactly():
    serialized = _set(_example(), "image/object/class/label", [2**31 - 1])
    assert decode_example(serialized)[fields.CLASSES].numpy().tolist() == [2**31 - 1]


def test_label_and_text_must_agree():
    serialized = _example(class_texts=["dog"]).SerializeToString()
    _expect(serialized, "class_mismatch", "disagree", label_map={"cat": 1, "dog": 3})
    agreeing = _example(classes=[3], class_texts=["dog"]).SerializeToString()
    out = decode_example(agreeing, label_map={"cat": 1, "dog": 3})
    assert out[fields.CLASSES].numpy().tolist() == [3]


def test_text_missing_from_the_label_map_names_the_closest_names_and_the_map():
    serialized = _example(classes=[], class_texts=["cow"]).SerializeToString()
    _expect(
        serialized,
        "class_unknown",
        'field image/object/class/text has names not in the label map: "cow"; '
        'the label map has 1 name: "a"',
        label_map={"a": 1},
    )
    label_map = {"cat": 1, "dog": 2, "chat": 3}
    serialized = _example(
        boxes=BOX * 4, classes=[], class_texts=["dgo", "Cat", "dgo", "zebra"]
    ).SerializeToString()
    _expect(
        serialized,
        "class_unknown",
        'field image/object/class/text has names not in the label map: "dgo" (did you mean '
        '"dog"?), "Cat" (did you mean "cat", "chat"?), "zebra"; the label map has 3 names: '
        '"cat", "dog", "chat"',
        label_map=label_map,
    )
    many = {f"class{i}": i for i in range(1, 13)}
    serialized = _example(classes=[], class_texts=["class13"]).SerializeToString()
    _expect(
        serialized,
        "class_unknown",
        '"class13" (did you mean "class10", "class11", "class12"?); the label map has 12 names: '
        '"class1", "class2", "class3", "class4", "class5", "class6", "class7", "class8", '
        '"class9", "class10", ...',
        label_map=many,
    )


def test_a_missing_name_that_is_not_utf8_is_shown_with_replacement_characters():
    serialized = _example(classes=[], class_texts=[b"c\xffat"]).SerializeToString()
    out = decode_example(serialized, "data.tfrecord:5", checks="flag", label_map={"cat": 1})
    assert errors.reason_of(int(out[fields.ERROR])) == "class_unknown"
    assert out[fields.ERROR_DETAIL].numpy().decode() == (
        "record data.tfrecord:5 (source_id src-7): field image/object/class/text has names not "
        'in the label map: "c\ufffdat" (did you mean "cat"?); the label map has 1 name: "cat"'
    )


def test_image_class_text_missing_from_the_label_map_is_an_error_or_dropped():
    serialized = _example(image_class_texts=["dgo"]).SerializeToString()
    _expect(
        serialized,
        "class_unknown",
        'field image/class/text has names not in the label map: "dgo" (did you mean "dog"?)',
        label_map={"cat": 1, "dog": 2},
    )
    both = _example(image_class_texts=["dgo", "cat"]).SerializeToString()
    out = decode_example(both, label_map={"cat": 1, "dog": 2}, unknown_classes="drop")
    assert out[fields.IMAGE_CLASSES].numpy().tolist() == [1]


def test_raw_image_height_that_would_wrap_int32():
    serialized = _example(
        image=IMAGE.tobytes(), image_format="raw", height=2**32 + 48, width=64
    ).SerializeToString()
    _expect(serialized, "image_size", "must be in [1, 2**31)")


def test_raw_image_of_wrong_byte_count():
    serialized = _example(
        image=IMAGE.tobytes()[:-1], image_format="raw", height=48, width=64
    ).SerializeToString()
    _expect(serialized, "image_size", "got 9215")


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_boxes(value):
    serialized = _set(_example(), "image/object/bbox/xmax", [value])
    _expect(serialized, "box_not_finite", "non-finite coordinates")


def test_inverted_box():
    serialized = _set(_example(), "image/object/bbox/ymax", [0.05])
    _expect(serialized, "box_order", "ymin > ymax")


def test_unequal_box_lists():
    serialized = _set(_example(), "image/object/bbox/xmin", [0.1, 0.2])
    _expect(serialized, "box_lists", "unequal length")


def test_box_out_of_range_is_an_error_or_clipped_and_counted():
    serialized = _example(
        boxes=[[0.1, -0.5, 0.5, 0.6], [0.2, 0.2, 0.4, 0.4], [1.2, 0.1, 1.5, 0.3]],
        classes=[1, 2, 3],
    ).SerializeToString()
    _expect(serialized, "box_out_of_range", "outside [0, 1]: [1.2 -0.5 1.5]")
    out = decode_example(serialized, boxes_out_of_range="clip")
    np.testing.assert_allclose(out[fields.BOXES], [[0.1, 0.0, 0.5, 0.6], [0.2, 0.2, 0.4, 0.4]])
    assert out[fields.CLASSES].numpy().tolist() == [1, 2]
    assert int(out[fields.NUM_DROPPED_BOXES]) == 1


def test_float_noise_outside_the_range_is_clipped_not_an_error():
    serialized = _example(boxes=[[0.0, -1e-7, 1.0000001, 1.0]]).SerializeToString()
    out = decode_example(serialized)
    np.testing.assert_array_equal(out[fields.BOXES], [[0.0, 0.0, 1.0, 1.0]])


def test_keypoint_count_mismatch():
    example = _example(keypoints=np.full((1, 2, 2), 0.5, np.float32))
    serialized = _set(example, "image/object/keypoint/x", [0.5, 0.5, 0.5])
    _expect(serialized, "keypoints", "keypoint/x has 3 values", num_keypoints=2)


def test_per_box_list_of_wrong_length():
    serialized = _set(_example(), "image/object/weight", [1.0, 2.0])
    _expect(serialized, "per_box_count", "image/object/weight has 2 values for 1 boxes")


def test_per_box_lists_are_one_check_that_names_the_first_bad_list():
    example = _example()
    _set(example, "image/object/weight", [1.0])
    serialized = _set(example, "image/object/group_of", [0, 1, 1])
    _expect(serialized, "per_box_count", "field image/object/group_of has 3 values for 1 boxes")


@pytest.mark.parametrize("masks", [None, "png"])
def test_a_flagged_record_decodes_to_consistent_stand_ins(masks):
    boxes = [[0.1, 0.2, 0.5, 0.6], [0.2, 0.2, 0.4, 0.4]]
    example = _example(boxes=boxes, classes=[1, 2])
    _set(example, "image/object/bbox/ymax", [0.5])  # unequal coordinate lists
    serialized = _set(example, "image/object/weight", [1.0, 1.0])
    out = decode_example(serialized, "data.tfrecord:5", checks="flag", masks=masks)
    assert errors.reason_of(int(out[fields.ERROR])) == "box_lists"
    assert out[fields.IMAGE].shape == (1, 1, 3)
    assert out[fields.BOXES].shape == (0, 4)
    for name in (fields.CLASSES, fields.WEIGHTS, fields.AREA, fields.IS_CROWD, fields.TRACK_IDS):
        assert out[name].shape == (0,), name
    if masks:
        assert out[fields.MASKS].shape == (0, 1, 1)


def test_bytes_that_are_not_an_image():
    serialized = _set(_example(), "image/encoded", [b"GIF7 not really an image"])
    _expect(serialized, "not_an_image", "not a JPEG, PNG, GIF or BMP")


def test_missing_image():
    example = _example()
    del example.features.feature["image/encoded"]
    serialized = example.SerializeToString()
    _expect(serialized, "no_image", "image/encoded is missing or empty")


def test_too_many_pixels_is_an_error():
    serialized = _example().SerializeToString()
    _expect(serialized, "image_too_large", "more than max_image_pixels=3000", max_image_pixels=3000)


@pytest.mark.parametrize("image_format", ["jpeg", "png"])
def test_too_many_pixels_downscales_image_and_masks(image_format):
    masks = np.zeros((1, 48, 64), np.uint8)
    masks[0, 8:24, 16:48] = 1
    serialized = _example(image_format=image_format, masks=masks).SerializeToString()
    out = decode_example(
        serialized, masks="png", max_image_pixels=48 * 64 // 16, large_images="downscale"
    )
    assert out[fields.IMAGE].shape == (12, 16, 3)
    assert out[fields.MASKS].shape == (1, 12, 16)
    assert int(tf.reduce_sum(tf.cast(out[fields.MASKS], tf.int32))) == 4 * 8
    np.testing.assert_array_equal(out[fields.IMAGE_SHAPE], [12, 16])
    np.testing.assert_allclose(out[fields.BOXES], BOX)


def _png(array: np.ndarray) -> bytes:
    return tf.io.encode_png(array).numpy()


@pytest.mark.parametrize(
    "encoded",
    [
        _png(np.full((6, 5, 4), 200, np.uint8)),  # RGBA
        _png(np.full((6, 5, 1), 200, np.uint8)),  # gray
        _png(np.full((6, 5, 3), 200 * 257, np.uint16)),  # 16 bits
    ],
    ids=["alpha", "gray", "16-bit"],
)
def test_png_variants_decode_to_the_requested_channels(encoded):
    serialized = _example(image=encoded, image_format="png", height=6, width=5).SerializeToString()
    for policy in ("raise", "flag"):
        out = decode_example(serialized, checks=policy)
        np.testing.assert_array_equal(out[fields.IMAGE], np.full((6, 5, 3), 200, np.uint8))


def test_cmyk_jpeg_decodes_to_rgb():
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("CMYK", (5, 6), (0, 0, 0, 0)).save(buffer, format="JPEG", quality=100)
    serialized = _example(
        image=buffer.getvalue(), image_format="jpeg", height=6, width=5
    ).SerializeToString()
    image = decode_example(serialized)[fields.IMAGE]
    assert image.shape == (6, 5, 3)
    assert int(tf.reduce_min(image)) >= 250  # CMYK 0,0,0,0 is white


def test_flagged_record_decodes_in_graph_mode_with_the_code():
    bad = _set(_example(), "image/object/class/label", [0])
    good = _example().SerializeToString()
    dataset = tf.data.Dataset.from_tensor_slices([good, bad]).map(
        lambda s: decode_example(s, checks="flag")
    )
    codes = [int(x[fields.ERROR]) for x in dataset]
    assert codes == [errors.OK, errors.code("class_range")]


def test_bad_policies_fail_at_construction():
    for name in ("checks", "boxes_out_of_range", "large_images"):
        with pytest.raises(ValueError, match=name):
            decode_example(b"", **{name: "sometimes"})
    with pytest.raises(ValueError, match="max_image_pixels"):
        decode_example(b"", max_image_pixels=0)
