"""Reading under make_dataset(on_error=...): a damaged, compressed or vanished file raises
naming it or is counted as one unreadable file; errors of the source itself are never caught
as bad records."""

import gzip
import json
import os
import subprocess
import sys
import zlib

import pytest
import tensorflow as tf
from bad_records import (
    good_example,
    small_dataset,
    source_ids,
    write_records,
)

import object_input as oi
from object_input import fields
from object_input.reliability.skips import stats


def _tfrecord_bytes(tmp_path, records) -> bytes:
    return open(write_records(tmp_path / "whole.tfrecord", records), "rb").read()


def _file_damage(tmp_path) -> dict[str, tuple[bytes, int, str]]:
    records = [good_example(10 + i).SerializeToString() for i in range(4)]
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


# The short loop (-m "not slow") reads one truncated and one flipped file of each kind; every
# damage case takes a pipeline's seconds.
@pytest.mark.parametrize(
    "case",
    [
        "mid_record",
        pytest.param("inside_header", marks=pytest.mark.slow),
        "crc_mismatch",
        pytest.param("not_a_tfrecord", marks=pytest.mark.slow),
        pytest.param("gzip_without_flag", marks=pytest.mark.slow),
    ],
)
def test_damaged_file_raises_naming_it_or_is_counted(tmp_path, case):
    data, readable, text = _file_damage(tmp_path)[case]
    write_records(tmp_path / "a.tfrecord", [good_example(i).SerializeToString() for i in range(3)])
    damaged = tmp_path / "b.tfrecord"
    damaged.write_bytes(data)
    source = str(tmp_path / "[ab].tfrecord")
    with pytest.raises(tf.errors.InvalidArgumentError) as err:
        source_ids(small_dataset(source))
    message = str(err.value)
    assert f"file {damaged}: cannot read record {readable}" in message and text in message

    dataset = small_dataset(source, on_error="skip", batch_size=10)
    ids = [s for batch in source_ids(dataset) for s in batch]
    assert ids == ["good-0", "good-1", "good-2"] + [f"good-{10 + i}" for i in range(readable)]
    summary = stats(dataset)
    assert summary.skipped == {"unreadable_file": 1} and summary.passed == 3 + readable
    assert summary.offenders[0].startswith(f"{damaged}:{readable}: unreadable_file")
    assert f"; file {damaged}: cannot read record {readable}" in summary.offenders[0]


def _zlib_damage(tmp_path) -> dict[str, tuple[str, bytes, str, int | None, str]]:
    """case -> (compression read with, bytes of the damaged file (good ones are written with
    that compression), its readable records (None: some), text of the error)."""
    records = [good_example(10 + i).SerializeToString() for i in range(4)]
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
        pytest.param("checksum_cut", marks=pytest.mark.slow),
        pytest.param("stream_cut", marks=pytest.mark.slow),
        "crc_mismatch",
        "mid_record",
        pytest.param("inside_header", marks=pytest.mark.slow),
        pytest.param("two_streams", marks=pytest.mark.slow),
        pytest.param("plain_as_zlib", marks=pytest.mark.slow),
        pytest.param("gzip_as_zlib", marks=pytest.mark.slow),
        pytest.param("zlib_as_plain", marks=pytest.mark.slow),
        pytest.param("zlib_as_gzip", marks=pytest.mark.slow),
    ],
)
def test_damaged_zlib_file_raises_naming_it_or_is_counted(tmp_path, case):
    compression, data, readable, text = _zlib_damage(tmp_path)[case]
    good = _tfrecord_bytes(tmp_path, [good_example(i).SerializeToString() for i in range(3)])
    (tmp_path / "a.tfrecord").write_bytes(_compressed(good, compression))
    damaged = tmp_path / "b.tfrecord"
    damaged.write_bytes(data)
    source = str(tmp_path / "[ab].tfrecord")
    reading = {"num_readers": 1, "compression": compression or None}
    with pytest.raises(tf.errors.InvalidArgumentError) as err:
        source_ids(small_dataset(source, reading=reading))
    message = str(err.value)
    assert f"file {damaged}: cannot read record {'' if readable is None else readable}" in message
    assert text in message, message

    dataset = small_dataset(source, on_error="skip", batch_size=10, reading=reading)
    ids = [s for batch in source_ids(dataset) for s in batch]
    read = len(ids) - 3 if readable is None else readable
    assert read < 4 or readable == 4
    assert ids == ["good-0", "good-1", "good-2"] + [f"good-{10 + i}" for i in range(read)]
    summary = stats(dataset)
    assert summary.skipped == {"unreadable_file": 1} and summary.passed == 3 + read
    assert summary.offenders[0].startswith(f"{damaged}:{read}: unreadable_file")
    assert f"; file {damaged}: cannot read record {read} at byte " in summary.offenders[0]


@pytest.mark.slow
def test_intact_zlib_files_read_whole_under_both_policies(tmp_path):
    records = [good_example(i).SerializeToString() for i in range(3)]
    (tmp_path / "z.tfrecord").write_bytes(zlib.compress(_tfrecord_bytes(tmp_path, records)))
    reading = {"num_readers": 1, "compression": "ZLIB"}
    for on_error in ("raise", "skip"):
        dataset = small_dataset(str(tmp_path / "z.tfrecord"), on_error=on_error, reading=reading)
        assert source_ids(dataset) == [["good-0", "good-1", "good-2"]]
    assert stats(dataset).skipped == {}


def test_truncated_gzip_file_is_named(tmp_path):
    records = [good_example(i).SerializeToString() for i in range(4)]
    data = gzip.compress(_tfrecord_bytes(tmp_path, records))
    damaged = tmp_path / "c.tfrecord.gz"
    damaged.write_bytes(data[:-20])
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"file {damaged}: cannot read"):
        source_ids(small_dataset(str(damaged)))
    dataset = small_dataset(str(damaged), on_error="skip")
    source_ids(dataset)
    assert stats(dataset).skipped == {"unreadable_file": 1}


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


@pytest.mark.slow
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
        write_records(
            tmp_path / f"{name}.tfrecord", [good_example(i).SerializeToString() for i in range(2)]
        )
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


def test_zlib_size_is_counted_exactly_however_far_it_inflates(tmp_path):
    from object_input.sources import _integrity as integrity

    data = bytes(3 * 2**20 + 5)  # zeros: a few KiB inflating to several read chunks
    path = tmp_path / "zeros.z"
    path.write_bytes(zlib.compress(data))
    assert integrity.expected_bytes(str(path), "ZLIB") == len(data)
    path.write_bytes(zlib.compress(data) + b"\0")
    assert integrity.expected_bytes(str(path), "ZLIB") == integrity.DAMAGED


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_reading_errors_are_never_caught_as_bad_records(on_error):
    def read(index):
        # An error of the source itself, upstream of decoding: it must end the stream.
        tf.debugging.assert_less(index, tf.constant(5, tf.int64), message="reading failed")
        return {fields.IMAGE: tf.zeros([4, 4, 3], tf.uint8), fields.BOXES: tf.zeros([0, 4])}

    source = oi.sources.Dataset(tf.data.Dataset.range(8).map(read))
    dataset = small_dataset(source, batch_size=None, on_error=on_error)
    with pytest.raises(tf.errors.InvalidArgumentError, match="reading failed"):
        list(dataset)
    if on_error == "skip":
        assert not stats(dataset).skipped
