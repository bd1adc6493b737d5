"""TFRecord files read to their end, or an error naming the file: byte accounting per file.

TensorFlow's reader reports a truncated or corrupt record without the file's name, and ends a
file cut inside a record header without any error. Here each file's records are counted with
their framing (12 header bytes + data + 4 CRC bytes) and, when the file ends, the bytes read are
compared with the bytes the file holds: its size, or for GZIP the uncompressed size in its
trailer. A shortfall is the file-level error ``unreadable_file``: raised naming the file, the
record and the byte offset, or, under ``on_error="skip"``, reported as a flagged element so the
records before it are kept and the file's loss is counted.
"""

from __future__ import annotations

import struct

import tensorflow as tf

from object_input import errors

_FRAMING = 16  # length (8) + length CRC (4) + data CRC (4)
_HEADER = 12
UNCHECKED = -1


def expected_bytes(path: str, compression: str) -> int:
    """Framed bytes a complete ``path`` yields (``UNCHECKED`` when it cannot be known).

    Plain files: the file size. GZIP: the uncompressed size modulo 2**32 from the trailer (one
    gzip member, as TFRecordWriter writes). ZLIB streams carry no size.
    """
    if compression == "":
        return tf.io.gfile.stat(path).length
    if compression == "GZIP":
        with tf.io.gfile.GFile(path, "rb") as f:
            size = f.size()
            if size < 4:
                return 2**32  # cannot match: a GZIP file has a trailer
            f.seek(size - 4)
            return struct.unpack("<I", f.read(4))[0]
    return UNCHECKED


def checked_records(
    path: tf.Tensor,
    expected: tf.Tensor,
    compression: str | tf.Tensor,
    on_error: str,
    buffer_size: int | None = None,
) -> tf.data.Dataset:
    """Records of one file as ``(payload, error, detail)`` (``read_files(checked=True)``).

    ``error`` is 0 for records; after the last record comes, only if the file could not be read
    to its end, one element with the ``unreadable_file`` code and ``detail`` saying where and
    why (under ``on_error="raise"`` that is an InvalidArgumentError instead).
    """
    errors.check_policy(on_error)
    records = tf.data.TFRecordDataset(path, compression_type=compression, buffer_size=buffer_size)
    # Reading stops at the first unreadable byte; the count below tells that from a clean end.
    records = records.ignore_errors(log_warning=on_error == "skip")
    ends = tf.data.Dataset.from_tensors((tf.constant(""), tf.constant(True)))
    stream = records.map(lambda r: (r, tf.constant(False))).concatenate(ends)
    unreadable = errors.code("unreadable_file")

    @tf.autograph.experimental.do_not_convert
    def step(state, element):
        index, consumed = state
        payload, is_end = element
        if_gzip = tf.equal(compression, "GZIP")
        seen = tf.where(if_gzip, consumed % 2**32, consumed)
        complete = tf.equal(expected, UNCHECKED) | tf.equal(seen, expected)
        failed = is_end & ~complete
        detail = tf.cond(failed, lambda: _why(path, index, consumed, expected, compression), str)
        if on_error == "raise":
            check = tf.debugging.Assert(~failed, [detail])
            with tf.control_dependencies([check]):
                failed = tf.identity(failed)
        length = tf.cast(tf.strings.length(payload), tf.int64) + _FRAMING
        state = (index + 1, consumed + tf.where(is_end, tf.constant(0, tf.int64), length))
        error = tf.where(failed, unreadable, errors.OK)
        return state, (payload, error, detail, is_end & ~failed)

    zero = tf.constant(0, tf.int64)
    return (
        stream.scan((zero, zero), step)
        .filter(lambda payload, error, detail, clean_end: ~clean_end)
        .map(lambda payload, error, detail, clean_end: (payload, error, detail))
    )


def _why(path, index, consumed, expected, compression) -> tf.Tensor:
    """The message for a file that ended ``expected - consumed`` bytes early."""
    where = tf.strings.join(
        [
            "file ",
            path,
            ": cannot read record ",
            tf.strings.as_string(index),
            " at byte ",
            tf.strings.as_string(consumed),
        ]
    )
    plain = tf.equal(compression, "")
    remaining = expected - consumed
    why = tf.case(
        [
            (
                ~plain,
                lambda: tf.constant(
                    " of the uncompressed data: the compressed file is truncated or corrupt"
                ),
            ),
            (
                tf.equal(consumed, 0),
                lambda: tf.constant(
                    ": not a TFRecord file (GZIP-compressed data needs compression='GZIP' or a "
                    "name ending in .gz)"
                ),
            ),
            (
                remaining < _HEADER,
                lambda: tf.strings.join(
                    [
                        " of ",
                        tf.strings.as_string(expected),
                        ": the file ends inside a record header (truncated)",
                    ]
                ),
            ),
        ],
        default=lambda: tf.strings.join(
            [
                " of ",
                tf.strings.as_string(expected),
                ": the record is truncated or corrupt (length or CRC mismatch)",
            ]
        ),
    )
    return tf.strings.join([where, why])
