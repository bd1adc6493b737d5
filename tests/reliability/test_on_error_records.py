"""Decoding under make_dataset(on_error=...): every bad record raises naming file, record and
field, or is skipped alone (never its batch neighbours), counted by reason and reported; image
variants, huge images and images without boxes under both policies."""

import io
import logging

import numpy as np
import pytest
import tensorflow as tf
from bad_records import (
    LABEL_MAP,
    bad_record,
    good_example,
    mask_png,
    records_with_bad,
    small_dataset,
    source_ids,
    truncated_jpeg,
    write_records,
)

import object_input as oi
from object_input import fields
from object_input.reliability import errors
from object_input.reliability.skips import stats
from object_input.writers import encode_image

# name -> (bad record, reason under skip, text the raised error holds, make_dataset options)
RECORD_CASES = {
    "not_an_image": (bad_record(image__encoded=b"GIF7 nope"), "not_an_image", "image/encoded", {}),
    "truncated_jpeg": (
        bad_record(image__encoded=truncated_jpeg()),
        "undecodable",
        "Invalid JPEG",
        {},
    ),
    "not_an_example": (b"\x0a\x05hello", "undecodable", "Could not parse example", {}),
    "nan_box": (bad_record(image__object__bbox__ymin=float("nan")), "box_not_finite", "bbox", {}),
    "inf_box": (bad_record(image__object__bbox__xmax=float("inf")), "box_not_finite", "bbox", {}),
    "ymin_gt_ymax": (bad_record(image__object__bbox__ymin=0.9), "box_order", "ymin > ymax", {}),
    "out_of_range": (bad_record(image__object__bbox__xmax=1.5), "box_out_of_range", "[1.5]", {}),
    "unequal_boxes": (
        bad_record(image__object__bbox__xmin=[0.1, 0.2]),
        "box_lists",
        "unequal length",
        {},
    ),
    "class_0": (bad_record(image__object__class__label=0), "class_range", "class/label", {}),
    "class_negative": (bad_record(image__object__class__label=-2), "class_range", "[-2]", {}),
    "class_2_pow_32": (
        bad_record(image__object__class__label=2**32 + 1),
        "class_range",
        "[4294967297]",
        {},
    ),
    "unknown_text": (
        bad_record(image__object__class__label=[], image__object__class__text=b"cow"),
        "class_unknown",
        "cow",
        {"label_map": LABEL_MAP},
    ),
    "label_text_disagree": (
        bad_record(image__object__class__text=b"dog"),
        "class_mismatch",
        "disagree",
        {"label_map": LABEL_MAP},
    ),
    "mask_count": (
        bad_record(image__object__mask=[mask_png(16, 24)] * 2),
        "mask",
        "2 PNGs for 1 boxes",
        {"masks": "png"},
    ),
    "mask_transposed": (
        bad_record(image__object__mask=mask_png(24, 16)),
        "mask",
        "[[24 16]]",
        {"masks": "png"},
    ),
    "mask_size": (
        bad_record(image__object__mask=mask_png(8, 12)),
        "mask",
        "[[8 12]]",
        {"masks": "png"},
    ),
    "keypoint_count": (
        bad_record(
            image__object__keypoint__y=[0.5, 0.5, 0.5], image__object__keypoint__x=[0.5] * 3
        ),
        "keypoints",
        "keypoint/y has 3 values",
        {"num_keypoints": 2},
    ),
    "huge_image": (
        bad_record(image__encoded=encode_image(np.zeros((40, 40, 3), np.uint8))),
        "image_too_large",
        "max_image_pixels=1000",
        {"decoding": {"max_image_pixels": 1000}},
    ),
    "too_many_boxes": (
        bad_record(
            image__object__bbox__ymin=[0.1] * 3,
            image__object__bbox__xmin=[0.1] * 3,
            image__object__bbox__ymax=[0.5] * 3,
            image__object__bbox__xmax=[0.5] * 3,
            image__object__class__label=[1] * 3,
        ),
        "too_many_boxes",
        "more than max_boxes=2",
        {"max_boxes": 2},
    ),
}


def _groups() -> dict[str, list[str]]:
    """Cases sharing make_dataset options, to run in one dataset."""
    groups: dict[str, list[str]] = {}
    for case, (_, _, _, options) in RECORD_CASES.items():
        groups.setdefault(repr(sorted(options.items())), []).append(case)
    return {cases[0]: cases for cases in groups.values()}


GROUPS = _groups()


def _mixed(tmp_path, cases: list[str]) -> str:
    """A file of good records with the bad record of each case after every second one."""
    records = []
    for number, case in enumerate(cases):
        records += [
            good_example(2 * number).SerializeToString(),
            good_example(2 * number + 1).SerializeToString(),
        ]
        records.append(RECORD_CASES[case][0])
    return write_records(tmp_path / "data.tfrecord", records)


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_bad_records_raise_naming_file_record_and_field(tmp_path, group):
    cases = GROUPS[group]
    path = _mixed(tmp_path, cases)
    iterator = iter(small_dataset(path, batch_size=1, **RECORD_CASES[group][3]))
    messages = []
    while True:
        try:
            next(iterator)
        except tf.errors.InvalidArgumentError as err:
            messages.append(str(err))
        except StopIteration:
            break
    assert len(messages) == len(cases)
    for number, (case, message) in enumerate(zip(cases, messages, strict=True)):
        where = f"{path}:{3 * number + 2}"
        if RECORD_CASES[case][1] == "undecodable":
            # TensorFlow's own error is caught for the record, and logged by TensorFlow.
            assert f"record {where}: undecodable: " in message, message
            assert "TensorFlow logged its own error for it just above" in message
        else:
            assert RECORD_CASES[case][2] in message, (case, message)
            assert f"record {where} (source_id bad): " in message, message


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_bad_records_alone_are_skipped_counted_and_logged(tmp_path, group, caplog):
    cases = GROUPS[group]
    path = _mixed(tmp_path, cases)
    dataset = small_dataset(path, on_error="skip", **RECORD_CASES[group][3])
    batches = source_ids(dataset)
    ids = [f"good-{i}" for i in range(2 * len(cases))]
    assert batches == [ids[i : i + 4] for i in range(0, len(ids), 4)]
    with caplog.at_level(logging.WARNING, logger="object_input"):
        summary = stats(dataset)
        assert oi.stats(dataset) == summary  # read twice, logged once
    reasons = [RECORD_CASES[case][1] for case in cases]
    assert summary.passed == len(ids)
    assert summary.skipped == {r: reasons.count(r) for r in reasons}
    for number, case in enumerate(cases):
        _, reason, text, _ = RECORD_CASES[case]
        where = f"{path}:{3 * number + 2}"
        offender = summary.offenders[number]
        assert offender.startswith(f"{where}: {reason}: {errors.REASONS[reason]}"), offender
        if reason != "undecodable":  # TensorFlow logs its own error for those
            assert f"; record {where} (source_id bad): " in offender and text in offender
        assert caplog.text.count(f"skipped record {where}: {reason}") == 1


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_image_variants_decode_under_both_policies(tmp_path, on_error):
    from PIL import Image

    cmyk = io.BytesIO()
    Image.new("CMYK", (24, 16), (0, 0, 0, 0)).save(cmyk, format="JPEG")
    images = [
        tf.io.encode_png(np.full((16, 24, 4), 90, np.uint8)).numpy(),
        tf.io.encode_png(np.full((16, 24, 1), 90, np.uint8)).numpy(),
        tf.io.encode_png(np.full((16, 24, 3), 90 * 257, np.uint16)).numpy(),
        cmyk.getvalue(),
    ]
    records = [bad_record(image__encoded=image) for image in images]
    path = write_records(tmp_path / "v.tfrecord", records)
    batch = next(iter(small_dataset(path, on_error=on_error)))
    assert batch[fields.IMAGE].shape == (4, 16, 24, 3)
    np.testing.assert_array_equal(batch[fields.IMAGE][:3], np.full((3, 16, 24, 3), 90))
    assert int(tf.reduce_min(batch[fields.IMAGE][3])) >= 250


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_huge_image_is_downscaled_at_decode_on_request(tmp_path, on_error):
    huge = bad_record(
        image__encoded=encode_image(np.full((40, 60, 3), 90, np.uint8)),
        image__height=40,
        image__width=60,
    )
    path = write_records(tmp_path / "h.tfrecord", records_with_bad(huge, count=2, at=1))
    decoding = {"max_image_pixels": 600, "large_images": "downscale"}
    dataset = small_dataset(path, on_error=on_error, batch_size=None, decoding=decoding)
    examples = list(dataset)
    assert [x[fields.SOURCE_ID].numpy() for x in examples] == [b"good-0", b"bad", b"good-1"]
    # sqrt(600 / (40 * 60)) = 1/2: 20 x 30, the aspect kept; 16 x 24 is under the limit.
    assert [x[fields.IMAGE].shape for x in examples] == [(16, 24, 3), (20, 30, 3), (16, 24, 3)]
    np.testing.assert_array_equal(examples[1][fields.IMAGE], np.full((20, 30, 3), 90))
    np.testing.assert_allclose(examples[1][fields.BOXES], [[0.1, 0.1, 0.6, 0.5]])
    assert stats(dataset).skipped == {}


@pytest.mark.parametrize("on_error", [pytest.param("raise", marks=pytest.mark.slow), "skip"])
def test_images_without_boxes_are_kept_or_dropped_on_request(tmp_path, on_error):
    empty = bad_record(
        image__object__bbox__ymin=[],
        image__object__bbox__xmin=[],
        image__object__bbox__ymax=[],
        image__object__bbox__xmax=[],
        image__object__class__label=[],
    )
    path = write_records(tmp_path / "e.tfrecord", records_with_bad(empty, count=3, at=1))
    kept = source_ids(small_dataset(path, on_error=on_error))
    assert kept == [["good-0", "bad", "good-1", "good-2"]]
    dataset = small_dataset(path, on_error=on_error, empty_images="drop")
    assert source_ids(dataset) == [["good-0", "good-1", "good-2"]]
    assert stats(dataset).skipped == {"empty": 1}
