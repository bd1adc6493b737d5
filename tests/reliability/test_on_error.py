"""make_dataset(on_error=...): every bad-data case raises naming file, record and field, or is
skipped alone (never its batch neighbours), counted by reason and reported."""

import gzip
import io
import itertools
import json
import logging
import os
import re
import subprocess
import sys
import time
import zlib

import numpy as np
import pytest
import tensorflow as tf
from source_samples import SAMPLED, SOURCES, WITHOUT_SAMPLE, declares_sample, record_ids, sample

import object_input as oi
from object_input import fields
from object_input.reliability.skips import stats
from object_input.sources import _samples as samples
from object_input.writers import build_example, encode_image

IMAGE = np.full((16, 24, 3), 90, np.uint8)
LABEL_MAP = {"cat": 1, "dog": 2}


def _good(index: int) -> tf.train.Example:
    return build_example(
        IMAGE,
        boxes=[[0.1, 0.1, 0.6, 0.5]],
        classes=[1],
        source_id=f"good-{index}",
        masks=np.ones((1, 16, 24), np.uint8),
    )


def _with(example: tf.train.Example, **values) -> bytes:
    for key, value in values.items():
        key = key.replace("__", "/")
        value = value if isinstance(value, list) else [value]
        if not value:
            del example.features.feature[key]
            continue
        feature = example.features.feature[key]
        feature.Clear()
        if isinstance(value[0], bytes):
            feature.bytes_list.value.extend(value)
        elif isinstance(value[0], float):
            feature.float_list.value.extend(value)
        else:
            feature.int64_list.value.extend(value)
    return example.SerializeToString()


def _bad(**values) -> bytes:
    example = _good(0)
    example.features.feature["image/source_id"].bytes_list.value[0] = b"bad"
    return _with(example, **values)


def _mask_png(height: int, width: int) -> bytes:
    return encode_image(np.ones((height, width, 1), np.uint8))


def _truncated_jpeg() -> bytes:
    data = encode_image(np.random.default_rng(0).integers(0, 255, (64, 64, 3), np.uint8), "jpeg")
    return data[: len(data) // 2]


# name -> (bad record, reason under skip, text the raised error holds, make_dataset options)
RECORD_CASES = {
    "not_an_image": (_bad(image__encoded=b"GIF7 nope"), "not_an_image", "image/encoded", {}),
    "truncated_jpeg": (_bad(image__encoded=_truncated_jpeg()), "undecodable", "Invalid JPEG", {}),
    "not_an_example": (b"\x0a\x05hello", "undecodable", "Could not parse example", {}),
    "nan_box": (_bad(image__object__bbox__ymin=float("nan")), "box_not_finite", "bbox", {}),
    "inf_box": (_bad(image__object__bbox__xmax=float("inf")), "box_not_finite", "bbox", {}),
    "ymin_gt_ymax": (_bad(image__object__bbox__ymin=0.9), "box_order", "ymin > ymax", {}),
    "out_of_range": (_bad(image__object__bbox__xmax=1.5), "box_out_of_range", "[1.5]", {}),
    "unequal_boxes": (
        _bad(image__object__bbox__xmin=[0.1, 0.2]),
        "box_lists",
        "unequal length",
        {},
    ),
    "class_0": (_bad(image__object__class__label=0), "class_range", "class/label", {}),
    "class_negative": (_bad(image__object__class__label=-2), "class_range", "[-2]", {}),
    "class_2_pow_32": (
        _bad(image__object__class__label=2**32 + 1),
        "class_range",
        "[4294967297]",
        {},
    ),
    "unknown_text": (
        _bad(image__object__class__label=[], image__object__class__text=b"cow"),
        "class_unknown",
        "cow",
        {"label_map": LABEL_MAP},
    ),
    "label_text_disagree": (
        _bad(image__object__class__text=b"dog"),
        "class_mismatch",
        "disagree",
        {"label_map": LABEL_MAP},
    ),
    "mask_count": (
        _bad(image__object__mask=[_mask_png(16, 24)] * 2),
        "mask",
        "2 PNGs for 1 boxes",
        {"masks": "png"},
    ),
    "mask_transposed": (
        _bad(image__object__mask=_mask_png(24, 16)),
        "mask",
        "[[24 16]]",
        {"masks": "png"},
    ),
    "mask_size": (
        _bad(image__object__mask=_mask_png(8, 12)),
        "mask",
        "[[8 12]]",
        {"masks": "png"},
    ),
    "keypoint_count": (
        _bad(image__object__keypoint__y=[0.5, 0.5, 0.5], image__object__keypoint__x=[0.5] * 3),
        "keypoints",
        "keypoint/y has 3 values",
        {"num_keypoints": 2},
    ),
    "huge_image": (
        _bad(image__encoded=encode_image(np.zeros((40, 40, 3), np.uint8))),
        "image_too_large",
        "max_image_pixels=1000",
        {"decoding": {"max_image_pixels": 1000}},
    ),
    "too_many_boxes": (
        _bad(
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


def _write(path, records) -> str:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return str(path)


def _records_with_bad(bad: bytes, count: int, at: int) -> list[bytes]:
    records = [_good(i).SerializeToString() for i in range(count)]
    records.insert(at, bad)
    return records


def _dataset(source, **options):
    options = {"batch_size": 4, "shuffle": False, "reading": {"num_readers": 1}, **options}
    return oi.make_dataset(source, **options)


def _source_ids(dataset) -> list[list[str]]:
    return [[s.decode() for s in batch[fields.SOURCE_ID].numpy()] for batch in dataset]


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
            _good(2 * number).SerializeToString(),
            _good(2 * number + 1).SerializeToString(),
        ]
        records.append(RECORD_CASES[case][0])
    return _write(tmp_path / "data.tfrecord", records)


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_bad_records_raise_naming_file_record_and_field(tmp_path, group):
    cases = GROUPS[group]
    path = _mixed(tmp_path, cases)
    iterator = iter(_dataset(path, batch_size=1, **RECORD_CASES[group][3]))
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
    dataset = _dataset(path, on_error="skip", **RECORD_CASES[group][3])
    batches = _source_ids(dataset)
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
        explanation = oi.reliability.errors.REASONS[reason]
        assert offender.startswith(f"{where}: {reason}: {explanation}"), offender
        if reason != "undecodable":  # TensorFlow logs its own error for those
            assert f"; record {where} (source_id bad): " in offender and text in offender
        assert caplog.text.count(f"skipped record {where}: {reason}") == 1


def _tfrecord_bytes(tmp_path, records) -> bytes:
    return open(_write(tmp_path / "whole.tfrecord", records), "rb").read()


def _file_damage(tmp_path) -> dict[str, tuple[bytes, int, str]]:
    records = [_good(10 + i).SerializeToString() for i in range(4)]
    data = _tfrecord_bytes(tmp_path, records)
    size = len(records[0]) + 16
    return {
        "mid_record": (data[: 2 * size + 40], 2, "truncated or corrupt"),
        "inside_header": (data[: 2 * size + 5], 2, "ends inside a record header"),
        "crc_mismatch": (
            data[: size + 30] + bytes([data[size + 30] ^ 1]) + data[size + 31 :],
            1,
            "length or CRC mismatch",
        ),
        "not_a_tfrecord": (b"just some text\n" * 20, 0, "not a TFRecord file"),
        "gzip_without_flag": (gzip.compress(data), 0, "GZIP-compressed data needs compression="),
    }


@pytest.mark.parametrize(
    "case", ["mid_record", "inside_header", "crc_mismatch", "not_a_tfrecord", "gzip_without_flag"]
)
def test_damaged_file_raises_naming_it_or_is_counted(tmp_path, case):
    data, readable, text = _file_damage(tmp_path)[case]
    _write(tmp_path / "a.tfrecord", [_good(i).SerializeToString() for i in range(3)])
    damaged = tmp_path / "b.tfrecord"
    damaged.write_bytes(data)
    source = str(tmp_path / "[ab].tfrecord")
    with pytest.raises(tf.errors.InvalidArgumentError) as err:
        _source_ids(_dataset(source))
    message = str(err.value)
    assert f"file {damaged}: cannot read record {readable}" in message and text in message

    dataset = _dataset(source, on_error="skip", batch_size=10)
    ids = [s for batch in _source_ids(dataset) for s in batch]
    assert ids == ["good-0", "good-1", "good-2"] + [f"good-{10 + i}" for i in range(readable)]
    summary = stats(dataset)
    assert summary.skipped == {"unreadable_file": 1} and summary.passed == 3 + readable
    assert summary.offenders[0].startswith(f"{damaged}:{readable}: unreadable_file")
    assert f"; file {damaged}: cannot read record {readable}" in summary.offenders[0]


def _zlib_damage(tmp_path) -> dict[str, tuple[str, bytes, str, int | None, str]]:
    """case -> (compression read with, bytes of the damaged file (good ones are written with
    that compression), its readable records (None: some), text of the error)."""
    records = [_good(10 + i).SerializeToString() for i in range(4)]
    raw = _tfrecord_bytes(tmp_path, records)
    whole = zlib.compress(raw)
    size = len(records[0]) + 16
    flipped = raw[: size + 30] + bytes([raw[size + 30] ^ 1]) + raw[size + 31 :]
    corrupt = "the compressed file is truncated or corrupt"
    of_all = f"of {len(raw)} uncompressed bytes: "
    return {
        # The stream ends inside its checksum: TensorFlow reads all four records silently.
        "checksum_cut": ("ZLIB", whole[:-2], 4, corrupt),
        "stream_cut": ("ZLIB", whole[: len(whole) // 2], None, "truncated or corrupt"),
        "crc_mismatch": ("ZLIB", zlib.compress(flipped), 1, of_all + "the record is truncated"),
        "mid_record": (
            "ZLIB",
            zlib.compress(raw[: 2 * size + 40]),
            2,
            f"of {2 * size + 40} uncompressed bytes: the record is truncated or corrupt",
        ),
        "inside_header": (
            "ZLIB",
            zlib.compress(raw[: 2 * size + 5]),
            2,
            "ends inside a record header",
        ),
        # TensorFlow reads the first stream of two and ignores what follows.
        "two_streams": ("ZLIB", whole + whole, 4, corrupt),
        "plain_as_zlib": ("ZLIB", raw, 0, "not ZLIB-compressed TFRecord data"),
        "gzip_as_zlib": ("ZLIB", gzip.compress(raw), 0, "not ZLIB-compressed TFRecord data"),
        "zlib_as_plain": ("", whole, 0, "ZLIB-compressed data compression="),
        "zlib_as_gzip": ("GZIP", whole, 0, "not GZIP-compressed TFRecord data"),
    }


def _compressed(data: bytes, compression: str) -> bytes:
    return {"": lambda d: d, "GZIP": gzip.compress, "ZLIB": zlib.compress}[compression](data)


@pytest.mark.parametrize(
    "case",
    [
        "checksum_cut",
        "stream_cut",
        "crc_mismatch",
        "mid_record",
        "inside_header",
        "two_streams",
        "plain_as_zlib",
        "gzip_as_zlib",
        "zlib_as_plain",
        "zlib_as_gzip",
    ],
)
def test_damaged_zlib_file_raises_naming_it_or_is_counted(tmp_path, case):
    compression, data, readable, text = _zlib_damage(tmp_path)[case]
    good = _tfrecord_bytes(tmp_path, [_good(i).SerializeToString() for i in range(3)])
    (tmp_path / "a.tfrecord").write_bytes(_compressed(good, compression))
    damaged = tmp_path / "b.tfrecord"
    damaged.write_bytes(data)
    source = str(tmp_path / "[ab].tfrecord")
    reading = {"num_readers": 1, "compression": compression or None}
    with pytest.raises(tf.errors.InvalidArgumentError) as err:
        _source_ids(_dataset(source, reading=reading))
    message = str(err.value)
    assert f"file {damaged}: cannot read record {'' if readable is None else readable}" in message
    assert text in message, message

    dataset = _dataset(source, on_error="skip", batch_size=10, reading=reading)
    ids = [s for batch in _source_ids(dataset) for s in batch]
    read = len(ids) - 3 if readable is None else readable
    assert read < 4 or readable == 4
    assert ids == ["good-0", "good-1", "good-2"] + [f"good-{10 + i}" for i in range(read)]
    summary = stats(dataset)
    assert summary.skipped == {"unreadable_file": 1} and summary.passed == 3 + read
    assert summary.offenders[0].startswith(f"{damaged}:{read}: unreadable_file")
    assert f"; file {damaged}: cannot read record {read} at byte " in summary.offenders[0]


def test_intact_zlib_files_read_whole_under_both_policies(tmp_path):
    records = [_good(i).SerializeToString() for i in range(3)]
    (tmp_path / "z.tfrecord").write_bytes(zlib.compress(_tfrecord_bytes(tmp_path, records)))
    reading = {"num_readers": 1, "compression": "ZLIB"}
    for on_error in ("raise", "skip"):
        dataset = _dataset(str(tmp_path / "z.tfrecord"), on_error=on_error, reading=reading)
        assert _source_ids(dataset) == [["good-0", "good-1", "good-2"]]
    assert stats(dataset).skipped == {}


def test_truncated_gzip_file_is_named(tmp_path):
    records = [_good(i).SerializeToString() for i in range(4)]
    data = gzip.compress(_tfrecord_bytes(tmp_path, records))
    damaged = tmp_path / "c.tfrecord.gz"
    damaged.write_bytes(data[:-20])
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"file {damaged}: cannot read"):
        _source_ids(_dataset(str(damaged)))
    dataset = _dataset(str(damaged), on_error="skip")
    _source_ids(dataset)
    assert stats(dataset).skipped == {"unreadable_file": 1}


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
    records = [_bad(image__encoded=image) for image in images]
    path = _write(tmp_path / "v.tfrecord", records)
    batch = next(iter(_dataset(path, on_error=on_error)))
    assert batch[fields.IMAGE].shape == (4, 16, 24, 3)
    np.testing.assert_array_equal(batch[fields.IMAGE][:3], np.full((3, 16, 24, 3), 90))
    assert int(tf.reduce_min(batch[fields.IMAGE][3])) >= 250


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_huge_image_is_downscaled_at_decode_on_request(tmp_path, on_error):
    huge = _bad(
        image__encoded=encode_image(np.full((40, 60, 3), 90, np.uint8)),
        image__height=40,
        image__width=60,
    )
    path = _write(tmp_path / "h.tfrecord", _records_with_bad(huge, count=2, at=1))
    decoding = {"max_image_pixels": 600, "large_images": "downscale"}
    dataset = _dataset(path, on_error=on_error, batch_size=None, decoding=decoding)
    examples = list(dataset)
    assert [x[fields.SOURCE_ID].numpy() for x in examples] == [b"good-0", b"bad", b"good-1"]
    # sqrt(600 / (40 * 60)) = 1/2: 20 x 30, the aspect kept; 16 x 24 is under the limit.
    assert [x[fields.IMAGE].shape for x in examples] == [(16, 24, 3), (20, 30, 3), (16, 24, 3)]
    np.testing.assert_array_equal(examples[1][fields.IMAGE], np.full((20, 30, 3), 90))
    np.testing.assert_allclose(examples[1][fields.BOXES], [[0.1, 0.1, 0.6, 0.5]])
    assert stats(dataset).skipped == {}


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_images_without_boxes_are_kept_or_dropped_on_request(tmp_path, on_error):
    empty = _bad(
        image__object__bbox__ymin=[],
        image__object__bbox__xmin=[],
        image__object__bbox__ymax=[],
        image__object__bbox__xmax=[],
        image__object__class__label=[],
    )
    path = _write(tmp_path / "e.tfrecord", _records_with_bad(empty, count=3, at=1))
    kept = _source_ids(_dataset(path, on_error=on_error))
    assert kept == [["good-0", "bad", "good-1", "good-2"]]
    dataset = _dataset(path, on_error=on_error, empty_images="drop")
    assert _source_ids(dataset) == [["good-0", "good-1", "good-2"]]
    assert stats(dataset).skipped == {"empty": 1}


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_unknown_step_or_bad_parameter_fails_at_build_time(tmp_path, on_error):
    path = _write(tmp_path / "s.tfrecord", [_good(0).SerializeToString()])
    with pytest.raises(ValueError, match="unknown"):
        _dataset(path, on_error=on_error, augment=[("random_flip_sideways", {})])
    with pytest.raises(ValueError, match="probability"):
        _dataset(path, on_error=on_error, augment=[("random_horizontal_flip", {"probability": 2})])


def test_on_error_is_validated(tmp_path):
    path = _write(tmp_path / "s.tfrecord", [_good(0).SerializeToString()])
    with pytest.raises(ValueError, match="on_error must be one of"):
        _dataset(path, on_error="ignore")
    # "mark" is for readers (ReadContext), not a pipeline policy.
    with pytest.raises(ValueError, match=r"on_error must be one of \('raise', 'skip'\)"):
        _dataset(path, on_error="mark")
    with pytest.raises(ValueError, match="no counts on this dataset"):
        stats(_dataset(path).take(1))


HANG_CHECK = """
import sys
import object_input as oi
import tensorflow as tf
dataset = oi.make_dataset(sys.argv[1], num_epochs=None, batch_size=None, shuffle=False)
try:
    next(iter(dataset))
except tf.errors.InvalidArgumentError as error:
    print("raised:", error.message)
"""


def test_repeating_records_that_all_fail_raise_instead_of_looping_forever(tmp_path):
    # A truncated JPEG fails in the map (an op error, not a flag) and no record ever survives:
    # the catch must still report it. A subprocess, so that a regression fails, not hangs.
    path = _write(tmp_path / "bad.tfrecord", [_bad(image__encoded=_truncated_jpeg())])
    run = subprocess.run(
        [sys.executable, "-c", HANG_CHECK, path],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert "raised:" in run.stdout, run.stderr[-2000:]
    assert f"{path}:0: undecodable" in run.stdout


VANISHED_CHECK = """
import json, os, sys
import tensorflow as tf
import object_input as oi
from object_input.verification.verify import verify_files
from object_input.reliability.skips import stats
folder, gone, on_error, verified = sys.argv[1:]
if verified == "verified":
    verify_files(folder)
dataset = oi.make_dataset(
    folder, batch_size=None, shuffle=False, on_error=on_error, reading={"num_readers": 1}
)
path = os.path.join(folder, "b.tfrecord")
os.remove(path)
if gone == "directory":
    os.mkdir(path)
try:
    ids = [element["source_id"].numpy().decode() for element in dataset]
    print(json.dumps([ids, stats(dataset).skipped, stats(dataset).offenders]))
except tf.errors.OpError as error:
    print(json.dumps([type(error).__name__, error.message]))
"""


@pytest.mark.parametrize(
    "gone, on_error, verified",
    [
        ("deleted", "raise", ""),
        ("deleted", "skip", ""),
        ("directory", "skip", ""),
        ("deleted", "skip", "verified"),
    ],
)
def test_file_gone_after_listing_raises_naming_it_or_is_counted(tmp_path, gone, on_error, verified):
    # TensorFlow's reader does not move past a file it cannot open: under ignore_errors it
    # failed on it forever. A subprocess, so that a regression fails, not hangs.
    for name in "ab":
        _write(tmp_path / f"{name}.tfrecord", [_good(i).SerializeToString() for i in range(2)])
    path = tmp_path / "b.tfrecord"
    run = subprocess.run(
        [sys.executable, "-c", VANISHED_CHECK, str(tmp_path), gone, on_error, verified],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    outcome = json.loads(run.stdout)
    cannot_open = f"file {path}: cannot read record 0 at byte 0: cannot be opened"
    if verified:
        # Verified files are read plainly: TensorFlow's own error, naming the file.
        assert outcome[0] == "NotFoundError", outcome
        assert f"{path}; No such file or directory" in outcome[1], outcome
    elif on_error == "raise":
        assert outcome[0] == "InvalidArgumentError" and cannot_open in outcome[1], outcome
    else:
        ids, skipped, offenders = outcome
        assert ids == ["good-0", "good-1"] and skipped == {"unreadable_file": 1}, outcome
        assert offenders[0].startswith(f"{path}:0: unreadable_file: "), offenders
        assert cannot_open in offenders[0], offenders


def test_every_registered_source_declares_a_sample_next_to_itself():
    missing = sorted(n for n, c in SOURCES.items() if not declares_sample(c))
    assert missing == sorted(WITHOUT_SAMPLE), "declare Source.sample in the source's module"


@pytest.mark.parametrize("name", SAMPLED)
def test_every_source_raises_or_skips_its_damaged_record_alone(tmp_path, name):
    options = {"batch_size": None, "shuffle": False}
    good = sample(name, tmp_path / "good")
    examples = list(oi.make_dataset(good, **options))
    assert len(examples) == len(record_ids(good)) == samples.RECORDS
    bad = sample(name, tmp_path / "bad", samples.CERTAIN)
    if bad is None:
        return  # refused when made, naming the file: a format without record-level failures
    ids = record_ids(bad)
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        list(oi.make_dataset(bad, on_error="raise", **options))
    assert any(record_id in str(raised.value) for record_id in ids), str(raised.value)
    dataset = oi.make_dataset(bad, on_error="skip", **options)
    kept = list(dataset)
    summary = stats(dataset)
    assert summary.passed == len(kept) == samples.RECORDS - 1
    assert summary.total_skipped == 1
    assert summary.offenders[0].startswith(ids), summary.offenders


def test_dropped_boxes_are_counted_and_reachable_with_keras(tmp_path):
    crowded = _bad(
        image__object__bbox__ymin=[0.1] * 3,
        image__object__bbox__xmin=[0.1] * 3,
        image__object__bbox__ymax=[0.5] * 3,
        image__object__bbox__xmax=[0.5] * 3,
        image__object__class__label=[1] * 3,
    )
    path = _write(tmp_path / "k.tfrecord", _records_with_bad(crowded, count=2, at=1))
    dataset = _dataset(path, max_boxes=1, box_overflow="truncate", keras=True)
    images, targets = next(iter(dataset))
    assert images.shape[0] == 3 and targets["boxes"].shape == (3, 1, 4)
    summary = oi.stats(dataset)
    assert summary.dropped_boxes == 2 and summary.passed == 3 and not summary.skipped
    assert "3 records used, 0 skipped, 2 boxes dropped" in summary.format()


def test_mask_boxes_counts_what_it_removes():
    features = {
        fields.BOXES: tf.constant([[0.0, 0.0, 0.5, 0.5], [0.1, 0.1, 0.2, 0.2]]),
        fields.CLASSES: tf.constant([1, 2]),
        fields.NUM_DROPPED_BOXES: tf.constant(3),
    }
    out = oi.ops._core.mask_boxes(features, tf.constant([False, True]))
    assert out[fields.CLASSES].numpy().tolist() == [2] and int(out[fields.NUM_DROPPED_BOXES]) == 4


def test_cli_bench_prints_the_skip_summary(tmp_path, capsys):
    from object_input import cli

    bad = _bad(image__object__class__label=0)
    path = _write(tmp_path / "c.tfrecord", _records_with_bad(bad, count=3, at=2))
    # One batch of 4 takes the whole first epoch (the shuffle comes before the repeat), so the
    # bad record is always in it, whatever the unseeded shuffle order.
    argv = ["bench", path, "--steps", "1", "--warmup", "0", "--batch-size", "4", "--no-progress"]
    assert cli.main([*argv, "--on-error", "skip"]) == 0
    out = capsys.readouterr().out
    # bench repeats the data and prefetches ahead, so how many epochs' copies of the bad record
    # were counted when the summary is read depends on timing: at least one.
    assert re.search(r"\d+ records used, [1-9]\d* skipped", out) and "class_range" in out
    assert f"skipped {path}:2: class_range" in out
    assert cli.main(argv) == 1
    assert f"record {path}:2 (source_id bad)" in capsys.readouterr().err


def test_skip_logger_logs_new_offenders_and_reports_the_count(tmp_path, caplog):
    bad = _bad(image__object__bbox__ymin=0.9)
    path = _write(tmp_path / "l.tfrecord", _records_with_bad(bad, count=2, at=0))
    dataset = _dataset(path, on_error="skip")
    callback = oi.SkipLogger(dataset)
    _source_ids(dataset)
    logs: dict = {}
    with caplog.at_level(logging.WARNING, logger="object_input"):
        callback.on_epoch_end(0, logs)
        callback.on_epoch_end(1, logs)
    assert logs == {"skipped": 1}
    assert caplog.text.count(f"skipped record {path}:0: box_order") == 1


def test_zlib_size_is_counted_exactly_however_far_it_inflates(tmp_path):
    from object_input.sources import _integrity as integrity

    data = bytes(3 * 2**20 + 5)  # zeros: a few KiB inflating to several read chunks
    path = tmp_path / "zeros.z"
    path.write_bytes(zlib.compress(data))
    assert integrity.expected_bytes(str(path), "ZLIB") == len(data)
    path.write_bytes(zlib.compress(data) + b"\0")
    assert integrity.expected_bytes(str(path), "ZLIB") == integrity.DAMAGED


def _png_garbage() -> bytes:
    return encode_image(IMAGE)[:16] + b"not the rest of a PNG" * 4


# Records a TensorFlow op fails on (no check flags them), by position in a file of 37 records:
# two in a row, twice (15 and 16 straddled a window of the catch TFRecord sources had before
# catch.catch_marked), and the very last record.
TF_ERRORS = {
    3: _truncated_jpeg(),
    4: b"\xff\xd8\xff\xe0" + b"bytes that are not an image" * 3,
    15: _truncated_jpeg(),
    16: _png_garbage(),
    36: b"\xff\xd8\xff\xe0 not a JPEG either",
}


def _tf_error_file(tmp_path) -> tuple[str, list[str]]:
    """A file of 37 records with the TF_ERRORS images; the source ids of the good ones."""
    records, good = [], []
    for index in range(37):
        example = _good(index)
        if index in TF_ERRORS:
            records.append(_with(example, image__encoded=TF_ERRORS[index]))
        else:
            records.append(example.SerializeToString())
            good.append(f"good-{index}")
    return _write(tmp_path / "tf_errors.tfrecord", records), good


def test_tensorflow_op_errors_raise_naming_the_record_in_stream_order(tmp_path):
    path, good = _tf_error_file(tmp_path)
    iterator = iter(_dataset(path, batch_size=1))
    seen, failed = [], []
    while True:
        try:
            seen.append(next(iterator)[fields.SOURCE_ID].numpy()[0].decode())
        except tf.errors.InvalidArgumentError as err:
            failed.append(re.search(r"records? (.+?): undecodable: ", str(err)).group(1))
        except StopIteration:
            break
    # Failures in a row raise together, on the next good example, which goes with the error
    # (under "raise" the stream ends at the first error anyway).
    assert failed == [f"{path}:3, {path}:4", f"{path}:15, {path}:16", f"{path}:36"]
    assert seen == [i for i in good if i not in ("good-5", "good-17")]


@pytest.mark.parametrize("calls", [1, 3])
def test_tensorflow_op_errors_skip_the_record_alone(tmp_path, calls, caplog):
    path, good = _tf_error_file(tmp_path)
    dataset = _dataset(path, on_error="skip", num_parallel_calls=calls)
    assert _source_ids(dataset) == [good[i : i + 4] for i in range(0, len(good), 4)]
    with caplog.at_level(logging.WARNING, logger="object_input"):
        summary = stats(dataset)
    assert summary.passed == len(good) and summary.skipped == {"undecodable": len(TF_ERRORS)}
    where = [f"{path}:{index}" for index in TF_ERRORS]
    assert [o.split(": ")[0] for o in summary.offenders] == where
    assert re.findall(r"skipped record (\S+): undecodable", caplog.text) == where


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_reading_errors_are_never_caught_as_bad_records(on_error):
    def read(index):
        # An error of the source itself, upstream of decoding: it must end the stream.
        tf.debugging.assert_less(index, tf.constant(5, tf.int64), message="reading failed")
        return {fields.IMAGE: tf.zeros([4, 4, 3], tf.uint8), fields.BOXES: tf.zeros([0, 4])}

    source = oi.sources.Dataset(tf.data.Dataset.range(8).map(read))
    dataset = _dataset(source, batch_size=None, on_error=on_error)
    with pytest.raises(tf.errors.InvalidArgumentError, match="reading failed"):
        list(dataset)
    if on_error == "skip":
        assert not stats(dataset).skipped


def test_clean_data_gives_the_same_batches_under_either_policy_whatever_the_parallelism(
    tmp_path,
):
    rng = np.random.default_rng(3)
    records = [
        build_example(
            rng.integers(0, 255, (12, 16, 3), np.uint8),
            boxes=[[0.1, 0.2, 0.7, 0.9]],
            classes=[1],
            source_id=str(i),
        ).SerializeToString()
        for i in range(21)
    ]
    path = _write(tmp_path / "clean.tfrecord", records)
    options = {
        "seed": 5,
        "shuffle": True,
        "shuffle_buffer_size": 8,
        "augment": ["random_horizontal_flip", "random_crop_image", "random_adjust_brightness"],
        "image_size": (8, 8),
        "batch_size": 3,
    }

    def batches(on_error, calls):
        dataset = _dataset(path, on_error=on_error, num_parallel_calls=calls, **options)
        return [{k: v.numpy() for k, v in batch.items()} for batch in dataset]

    # The catch is invisible on clean data: "skip" and "raise", one thread or many, give the
    # batches of one thread under "raise", every record once.
    expected = batches("raise", 1)
    ids = sorted(int(i) for batch in expected for i in batch[fields.SOURCE_ID])
    assert ids == list(range(21))
    for on_error, calls in [
        ("skip", 1),
        *itertools.product(["raise", "skip"], [2, tf.data.AUTOTUNE]),
    ]:
        for got, want in zip(batches(on_error, calls), expected, strict=True):
            assert got.keys() == want.keys()
            for key in want:
                np.testing.assert_array_equal(
                    got[key], want[key], err_msg=f"{key}, {on_error}, {calls}"
                )


def _wait_until_idle(counts) -> None:
    """Until the pipeline's threads stop counting (its buffers are full): the counts saved next
    to the iterator then match its state (docs/reliability.md, what the checkpoint holds)."""
    previous = None
    while counts.snapshot() != previous:
        previous = counts.snapshot()
        time.sleep(0.3)


def test_iterator_checkpoints_mid_window_with_caught_errors(tmp_path):
    path, good = _tf_error_file(tmp_path)

    def make():
        dataset = _dataset(path, on_error="skip", seed=2, shuffle=True, shuffle_buffer_size=6)
        iterator = iter(dataset)
        counts = oi.reliability.skips.counter_of(dataset)
        return iterator, counts, tf.train.Checkpoint(iterator=iterator, counts=counts)

    iterator, counts, checkpoint = make()
    before = _source_ids([next(iterator) for _ in range(3)])
    _wait_until_idle(counts)
    saved = checkpoint.save(str(tmp_path / "ckpt"))
    rest = _source_ids(iterator)
    iterator, restored_counts, checkpoint = make()
    checkpoint.restore(saved).assert_consumed()
    assert _source_ids(iterator) == rest
    assert sorted(i for batch in before + rest for i in batch) == sorted(good)
    assert restored_counts.snapshot() == counts.snapshot()
    assert counts.snapshot().skipped == {"undecodable": len(TF_ERRORS)}


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_tensorflow_op_errors_are_settled_before_records_become_mosaic_partners(tmp_path, on_error):
    path, good = _tf_error_file(tmp_path)
    dataset = _dataset(path, on_error=on_error, seed=1, augment=["mosaic"], image_size=(16, 16))
    if on_error == "raise":
        with pytest.raises(tf.errors.InvalidArgumentError, match=f"records {path}:3, {path}:4: "):
            _source_ids(dataset)
        return
    assert [i for batch in _source_ids(dataset) for i in batch] == good
    assert stats(dataset).skipped == {"undecodable": len(TF_ERRORS)}


def _step_input_file(tmp_path) -> str:
    """Records 0..4, record 2 with an image smaller than caffe_transform's crop."""
    small = build_example(
        np.full((4, 6, 3), 9, np.uint8), boxes=[[0.1, 0.1, 0.5, 0.5]], classes=[1]
    )
    records = _records_with_bad(small.SerializeToString(), count=4, at=2)
    return _write(tmp_path / "steps.tfrecord", records)


def test_a_step_check_raises_its_own_message_naming_the_record(tmp_path):
    path = _step_input_file(tmp_path)
    dataset = _dataset(path, augment=[("caffe_transform", {"crop_size": 8})], batch_size=1)
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        list(dataset)
    message = str(raised.value)
    assert (
        f"record {path}:2: caffe_transform: the image of size [4 6] is smaller than crop_size 8"
        in message
    )


def test_a_step_check_skips_the_record_alone_by_its_reason(tmp_path):
    path = _step_input_file(tmp_path)
    dataset = _dataset(
        path, augment=[("caffe_transform", {"crop_size": 8})], on_error="skip", batch_size=5
    )
    (batch,) = list(dataset)
    assert [s.decode() for s in batch[fields.SOURCE_ID].numpy()] == [
        "good-0",
        "good-1",
        "good-2",
        "good-3",
    ]
    summary = stats(dataset)
    assert summary.skipped == {"step_input": 1}
    assert summary.offenders[0].startswith(f"{path}:2: step_input: ")
    assert "smaller than crop_size 8" in summary.offenders[0]
