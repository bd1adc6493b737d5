"""Fuzzing: random bytes and mutated valid records through the decoders give a feature dict or a
documented error (InvalidArgumentError naming the record), or a flag (checks="flag"); never a
crash or a hang. Few examples per run, for CI speed."""

import gzip
import zlib

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from object_input import fields, make_dataset, stats
from object_input.decoders import ExampleDecoder
from object_input.reliability import errors
from object_input.sources import TFRecord
from object_input.writers import build_example

MASKS = np.zeros((2, 6, 8), np.uint8)
MASKS[0, 1:3, 2:5] = 1
VALID = build_example(
    np.arange(6 * 8 * 3, dtype=np.uint8).reshape(6, 8, 3),
    boxes=[[0.1, 0.1, 0.5, 0.5], [0.2, 0.3, 0.9, 0.8]],
    classes=[1, 2],
    class_texts=["a", "b"],
    masks=MASKS,
    keypoints=np.full((2, 2, 2), 0.5, np.float32),
    source_id="valid",
).SerializeToString()
OPTIONS = {
    "masks": "png",
    "num_keypoints": 2,
    "label_map": {"a": 1, "b": 2},
    "max_image_pixels": 10_000,
}
FUZZ = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    database=None,
)


def _decoder(checks: str):
    decoder = ExampleDecoder(checks=checks, **OPTIONS)
    return tf.function(lambda serialized: decoder(serialized, "fuzz.tfrecord:0"))


RAISE = _decoder("raise")
FLAG = _decoder("flag")


def _mutate(data: bytes, edits: list[tuple[int, int]], cut: int) -> bytes:
    out = bytearray(data)
    for position, value in edits:
        out[position % len(out)] = value
    return bytes(out[: max(1, len(out) - cut)])


def _wire_format_ok(record: bytes) -> bool:
    """Whether protobuf reads ``record`` as an Example.

    TensorFlow 2.21's Example parser crashes the process (a segmentation fault, which no
    policy can catch) on some records whose wire format is corrupt: this fuzzing found two,
    e.g. a valid record with a few bytes overwritten, parsed with a float list for
    ``image/object/bbox/ymin``. The fuzz tests keep to records protobuf can read.
    """
    try:
        tf.train.Example.FromString(record)
    except Exception:  # protobuf's DecodeError type depends on its implementation
        return False
    return True


records = (
    st.binary(max_size=400)
    | st.builds(
        _mutate,
        st.just(VALID),
        st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=6),
        st.integers(0, 40),
    )
).filter(_wire_format_ok)


@pytest.mark.slow
@FUZZ
@given(records)
def test_decode_raise_gives_features_or_a_named_error(record):
    try:
        out = RAISE(tf.constant(record))
    except UnicodeDecodeError:
        return  # TensorFlow's parse error quotes non-UTF-8 bytes it then cannot decode
    except tf.errors.InvalidArgumentError as err:
        # A failed check names the record; parse and codec errors are TensorFlow's own.
        if "assertion failed" in str(err):
            assert "record fuzz.tfrecord:0" in str(err)
        return
    assert out[fields.BOXES].shape[1] == 4
    assert out[fields.MASKS].shape[1:] == out[fields.IMAGE].shape[:2]


@pytest.mark.slow
@FUZZ
@given(records)
def test_decode_flag_flags_or_raises_only_tensorflow_codec_errors(record):
    try:
        out = FLAG(tf.constant(record))
    except (tf.errors.InvalidArgumentError, UnicodeDecodeError):
        return  # undecodable: make_dataset(on_error="skip") counts these per record
    code = int(out[fields.ERROR])
    assert code == errors.OK or errors.reason_of(code) in errors.REASONS
    if code != errors.OK:
        # The message may quote the record's own bytes (a class text), which need not be UTF-8.
        assert "fuzz.tfrecord:0" in out[fields.ERROR_DETAIL].numpy().decode("utf-8", "replace")


@pytest.mark.slow
def test_the_unmutated_record_decodes_under_both_policies():
    assert int(FLAG(tf.constant(VALID))[fields.ERROR]) == errors.OK
    np.testing.assert_array_equal(RAISE(tf.constant(VALID))[fields.MASKS], MASKS)


@settings(
    max_examples=10,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.filter_too_much],
)
@given(st.binary(min_size=1, max_size=200).filter(_wire_format_ok))
def test_source_decode_of_random_payloads(tmp_path_factory, payload):
    path = tmp_path_factory.mktemp("fuzz") / "x.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        writer.write(VALID)
    source = TFRecord(str(path), masks="png")
    try:
        out = source.decode(tf.constant("x:0"), tf.constant(payload))
    except (tf.errors.InvalidArgumentError, UnicodeDecodeError):
        return
    code = int(out[fields.ERROR])
    assert code == errors.OK or errors.reason_of(code) in errors.REASONS
    if code != errors.OK:
        assert "record x:0" in out[fields.ERROR_DETAIL].numpy().decode("utf-8", "replace")


def _records_file(directory, compression: str) -> tuple[bytes, list[bytes]]:
    """Four records' TFRecord file bytes, compressed, and their source ids."""
    ids = [f"r{i}".encode() for i in range(4)]
    path = directory / "plain.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in ids:
            image = np.zeros((4, 6, 3), np.uint8)
            writer.write(build_example(image, source_id=i.decode()).SerializeToString())
    data = path.read_bytes()
    return {"": bytes, "GZIP": gzip.compress, "ZLIB": zlib.compress}[compression](data), ids


@pytest.mark.slow
@settings(max_examples=4, deadline=None, database=None)
@given(
    st.sampled_from(["", "GZIP", "ZLIB"]),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3),
    st.integers(0, 30),
    st.sampled_from(["raise", "skip"]),
)
def test_damaged_files_of_every_compression_give_a_prefix_and_are_named(
    tmp_path_factory, compression, edits, cut, on_error
):
    directory = tmp_path_factory.mktemp("damaged")
    data, ids = _records_file(directory, compression)
    path = directory / "d.tfrecord"
    path.write_bytes(_mutate(data, edits, cut))
    reading = {"compression": compression or None}
    dataset = make_dataset(
        str(path), batch_size=None, shuffle=False, on_error=on_error, reading=reading
    )
    try:
        read = [x[fields.SOURCE_ID].numpy() for x in dataset]
    except tf.errors.InvalidArgumentError as err:
        assert on_error == "raise" and f"file {path}: cannot read record" in str(err), str(err)
        return
    # CRCs guard every record: what is read is the file's first records, unchanged.
    assert read == ids[: len(read)]
    summary = stats(dataset)
    if summary.skipped:
        assert summary.skipped == {"unreadable_file": 1}
        assert summary.offenders[0].startswith(f"{path}:{len(read)}: unreadable_file")
    else:
        assert read == ids
