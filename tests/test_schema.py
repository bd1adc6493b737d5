"""schema.EXAMPLE: the writer, the decoder and inspection agree with the table; the shared
annotation checks give a bad record the same reason through the decoder and an Arrays source."""

import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input import decode_example, fields, schema
from object_input.decoders import ExampleDecoder
from object_input.reliability import errors
from object_input.sources import Arrays
from object_input.verification.inspection import inspect_records
from object_input.writers import build_example, encode_image, write_tfrecords

IMAGE = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
BOXES = np.array([[0.0, 0.1, 0.5, 0.6], [0.25, 0.2, 1.0, 0.8]], np.float32)
MASKS = np.zeros((2, 4, 5), np.uint8)
MASKS[0, :2, :3] = 1
MASKS[1, 1:, 1:4] = 1
KEYPOINTS = np.array([[[0.1, 0.2], [0.3, 0.4]], [[0.5, 0.5], [0.9, 0.7]]], np.float32)
# A value for every argument that build_example writes to a key of the table.
WRITTEN = {
    "boxes": BOXES,
    "classes": [3, 1],
    "class_texts": ["dog", "cat"],
    "filename": "a.png",
    "source_id": "17",
    "weights": [0.5, 1.0],
    "area": [10.0, 20.0],
    "is_crowd": [0, 1],
    "difficult": [1, 0],
    "truncated": [1, 1],
    "views": ["Left", "Front"],
    "group_of": [0, 1],
    "track_ids": [7, 8],
    "masks": MASKS,
    "keypoints": KEYPOINTS,
    "keypoint_visibilities": [[2, 0], [1, 2]],
    "multiclass_scores": np.array([[0.1, 0.9], [0.7, 0.3]], np.float32),
    "image_classes": [1, 3],
    "image_class_texts": ["cat", "dog"],
}
EXTRAS = [entry for entry in schema.EXAMPLE if entry.read == "extra_features"]


def _kind(feature: tf.train.Feature) -> str:
    return {v: k for k, v in schema.FEATURE_LISTS.items()}[feature.WhichOneof("kind")]


@pytest.mark.parametrize("mask_format", sorted(schema.MASK_KINDS))
def test_every_table_key_is_written_with_its_kind_and_decodes_to_its_field(mask_format):
    example = build_example(IMAGE, mask_format=mask_format, **WRITTEN)
    written = example.features.feature
    assert sorted(written) == sorted(entry.key for entry in schema.EXAMPLE)
    for entry in schema.EXAMPLE:
        assert _kind(written[entry.key]) == schema.kind_of(entry, mask_format), entry.key

    extra = {e.key: tf.io.VarLenFeature(schema.KINDS[e.kind]) for e in EXTRAS}
    out = decode_example(
        example.SerializeToString(),
        masks=mask_format,
        num_keypoints=2,
        multiclass_scores=True,
        extra_features=extra,
    )
    expected = {
        fields.IMAGE: IMAGE,
        fields.IMAGE_SHAPE: [4, 5],
        fields.FILENAME: b"a.png",
        fields.SOURCE_ID: b"17",
        fields.KEY: written[schema.SHA256].bytes_list.value[0],
        fields.BOXES: BOXES,
        fields.CLASSES: [3, 1],
        fields.WEIGHTS: [0.5, 1.0],
        fields.AREA: [10.0, 20.0],
        fields.IS_CROWD: [False, True],
        fields.DIFFICULT: [True, False],
        fields.GROUP_OF: [False, True],
        fields.TRACK_IDS: [7, 8],
        fields.IMAGE_CLASSES: [1, 3],
        fields.MASKS: MASKS,
        fields.KEYPOINTS: np.where([[[True], [False]], [[True], [True]]], KEYPOINTS, np.nan),
        fields.KEYPOINT_VISIBILITIES: [[True, False], [True, True]],
        fields.MULTICLASS_SCORES: WRITTEN["multiclass_scores"],
        "image/object/truncated": [1, 1],
        "image/object/view": [b"Left", b"Front"],
    }
    for entry in schema.EXAMPLE:
        if entry.field is not None:
            np.testing.assert_array_equal(out[entry.field], expected[entry.field], entry.key)


def test_class_texts_decode_to_the_class_fields_through_a_label_map():
    texts_only = {**WRITTEN, "classes": (), "image_classes": None}
    serialized = build_example(IMAGE, **texts_only).SerializeToString()
    out = decode_example(serialized, label_map={"cat": 1, "dog": 3})
    assert out[fields.CLASSES].numpy().tolist() == [3, 1]
    assert out[fields.IMAGE_CLASSES].numpy().tolist() == [1, 3]


def test_the_parse_spec_is_the_table():
    plain, full = ExampleDecoder(), ExampleDecoder(masks="numerical", num_keypoints=1)
    assert set(plain.spec) == {e.key for e in schema.EXAMPLE if e.read == "always"}
    assert set(full.spec) == {
        e.key for e in schema.EXAMPLE if e.read in ("always", "masks", "num_keypoints")
    }
    for entry in schema.EXAMPLE:
        if entry.key in full.spec:
            assert full.spec[entry.key].dtype == schema.KINDS[schema.kind_of(entry, "numerical")]
    with pytest.raises(ValueError, match=r"extra_features redefine schema keys \['image/format'\]"):
        ExampleDecoder(extra_features={schema.FORMAT: tf.io.VarLenFeature(tf.string)})


def test_inspect_reports_each_key_with_its_field_and_a_kind_the_decoder_cannot_parse(tmp_path):
    good = build_example(IMAGE, **WRITTEN)
    good.features.feature["image/object/score"].float_list.value.extend([0.5, 0.5])
    odd = build_example(IMAGE, boxes=BOXES[:1], classes=[1])
    odd.features.feature[schema.CLASS_LABEL].Clear()
    odd.features.feature[schema.CLASS_LABEL].float_list.value.append(1.0)
    report = inspect_records(write_tfrecords([good, odd], tmp_path / "x"))
    features = report.to_dict()["features"]
    for entry in schema.EXAMPLE:
        if entry.key != schema.CLASS_LABEL:
            assert features[entry.key]["field"] == entry.field, entry.key
            assert features[entry.key]["type"] == schema.kind_of(entry, "png"), entry.key
            assert "expected" not in features[entry.key], entry.key
    assert features[schema.CLASS_LABEL] == {
        "type": "float|int64",
        "shape": "[1..2]",
        "records": 2,
        "field": fields.CLASSES,
        "expected": "int64",
    }
    assert features["image/object/score"]["field"] is None
    text = report.format()
    assert "(the decoder parses int64)" in text
    assert "  image/object/score" in text and text.count("(the decoder parses") == 1


def _png_masks(count: int, height: int, width: int) -> list[bytes]:
    return [encode_image(np.ones((height, width, 1), np.uint8)) for _ in range(count)]


# reason: (boxes, classes, masks as PNG count and size); the image is 4 x 6.
BAD = {
    "box_not_finite": ([[0.1, 0.1, np.nan, 0.5]], [1], (1, 4, 6)),
    "box_order": ([[0.6, 0.1, 0.5, 0.5]], [1], (1, 4, 6)),
    "box_out_of_range": ([[0.1, 0.1, 0.5, 2.0]], [1], (1, 4, 6)),
    "class_count": ([[0.1, 0.1, 0.5, 0.5]], [1, 2], (1, 4, 6)),
    "class_range": ([[0.1, 0.1, 0.5, 0.5]], [0], (1, 4, 6)),
    "mask": ([[0.1, 0.1, 0.5, 0.5]], [1], (2, 4, 6)),
    "mask_size": ([[0.1, 0.1, 0.5, 0.5]], [1], (1, 6, 4)),
}


def _record(boxes, classes, masks) -> bytes:
    example = build_example(np.zeros((4, 6, 3), np.uint8), boxes=boxes, classes=[1] * len(boxes))
    feature = example.features.feature
    feature[schema.CLASS_LABEL].int64_list.value[:] = classes
    feature[schema.MASK].bytes_list.value.extend(_png_masks(*masks))
    return example.SerializeToString()


def test_a_bad_record_gets_the_same_reason_from_the_decoder_and_an_arrays_source():
    cases = sorted(BAD)
    decoded = [
        decode_example(_record(*BAD[case]), checks="flag", masks="png")[fields.ERROR]
        for case in cases
    ]
    reasons = [errors.reason_of(int(code)) for code in decoded]
    assert reasons == [case.removesuffix("_size") for case in cases]
    data = {
        fields.IMAGE: np.zeros((len(cases) + 1, 4, 6, 3), np.uint8),
        fields.BOXES: [np.array(BAD[c][0], np.float32) for c in cases]
        + [np.zeros([0, 4], np.float32)],
        fields.CLASSES: [np.array(BAD[c][1], np.int32) for c in cases] + [np.zeros([0], np.int32)],
        fields.MASKS: [np.ones(BAD[c][2], np.uint8) for c in cases]
        + [np.zeros([0, 4, 6], np.uint8)],
    }
    dataset = oi.make_dataset(Arrays(data), batch_size=None, shuffle=False, on_error="skip")
    assert [x[fields.RECORD_ID].numpy() for x in dataset] == [f"arrays:{len(cases)}".encode()]
    skipped = oi.stats(dataset).skipped
    assert skipped == {reason: reasons.count(reason) for reason in reasons}
