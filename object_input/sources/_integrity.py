"""TFRecord files read to their end, or an error naming the file: byte accounting per file.

TensorFlow's reader reports a truncated or corrupt record without the file's name, and ends a
file cut inside a record header without any error. Here each file's records are counted with
their framing (12 header bytes + data + 4 CRC bytes) and, when the file ends, the bytes read are
compared with the bytes the file holds: its size, for GZIP the uncompressed size in its trailer,
for ZLIB (whose stream carries no size) the size found by inflating the file once, in Python,
when the dataset is built. A shortfall, or a file that can no longer be opened (deleted since it
was listed, unreadable, a directory), is the file-level error ``unreadable_file``: raised naming
the file, the record and the byte offset, or, for a reader that marks (``ReadContext.marks``),
reported as a marked element so the records before it are kept and the pipeline can count the
file's loss.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import tensorflow as tf

from object_input.reliability import errors
from object_input.tracing.maps import map_on_cpu

_FRAMING = 16  # length (8) + length CRC (4) + data CRC (4)
_HEADER = 12
#: ``expected_bytes`` of a file that cannot be complete (its compressed stream is damaged).
DAMAGED = -1
_CHUNK = 1 << 20
# Files stat-ed or inflated at once when a dataset is built (I/O and zlib release the GIL).
_THREADS = 8


def expected_bytes(path: str, compression: str) -> int:
    """Framed bytes a complete ``path`` yields (``DAMAGED`` when none can be complete).

    Plain files: the file size. GZIP: the uncompressed size modulo 2**32 from the trailer (one
    gzip member, as TFRecordWriter writes). ZLIB: the file is inflated (not kept) to count its
    bytes, since the stream does not record them; a stream that is corrupt, ends before its end
    marker and checksum, or has data after them is ``DAMAGED`` (TensorFlow's reader ends such a
    file silently or reads only its first stream).
    """
    if compression == "":
        return tf.io.gfile.stat(path).length
    with tf.io.gfile.GFile(path, "rb") as f:
        if compression == "GZIP":
            size = f.size()
            if size < 4:
                return 2**32  # cannot match: a GZIP file has a trailer
            f.seek(size - 4)
            return struct.unpack("<I", f.read(4))[0]
        return _inflated_size(f)


def expected_sizes(files: Sequence[str], compressions: Sequence[str]) -> list[int]:
    """:func:`expected_bytes` of each file, several files at a time."""
    with ThreadPoolExecutor(min(_THREADS, max(1, len(files)))) as pool:
        return list(pool.map(expected_bytes, files, compressions))


def _inflated_size(f: tf.io.gfile.GFile) -> int:
    inflater = zlib.decompressobj()
    size = 0
    try:
        while chunk := f.read(_CHUNK):
            if inflater.eof:
                return DAMAGED  # data after the stream: TensorFlow's reader ignores it
            # Bounded output per call: a small file may inflate to a great deal.
            while True:
                size += len(out := inflater.decompress(chunk, _CHUNK))
                chunk = inflater.unconsumed_tail
                if inflater.eof or (not chunk and len(out) < _CHUNK):
                    break
    except zlib.error:
        return DAMAGED
    return size if inflater.eof and not inflater.unused_data else DAMAGED


def checked_records(
    path: tf.Tensor,
    expected: tf.Tensor,
    compression: str | tf.Tensor,
    marks: bool,
    record_id: Callable[[tf.Tensor], tf.Tensor],
) -> tf.data.Dataset:
    """Records of one file as ``(record_id, payload)`` (``read_files(checked=True)``).

    ``record_id(index)`` names the record at ``index`` (0-based) in the file. Without ``marks``
    a file that cannot be read to its end raises an InvalidArgumentError saying where and why
    after its last record. With ``marks`` the elements are ``(record_id, payload, error,
    detail)``: ``error`` is 0 for records; after the last record
    comes, only if the file could not be read to its end, one element with the
    ``unreadable_file`` code, the id of the record that could not be read and ``detail`` saying
    where and why.

    One function runs per record (a ``scan``: byte accounting, the end check and the record
    id); a filter that picks its flag drops the end element of a file read to its end.
    """
    raising = not marks
    # TensorFlow's reader does not move past a file it cannot open (deleted since it was listed,
    # unreadable, a directory): under ignore_errors it would fail on it again forever. The file
    # is opened once first, in a map, whose failure ignore_errors drops once: ``opened``.
    opened = (
        map_on_cpu(tf.data.Dataset.from_tensors(path), _opens)
        .ignore_errors()
        .concatenate(tf.data.Dataset.from_tensors(tf.constant(False)))
        .take(1)
    )

    def file_stream(is_open: tf.Tensor) -> tf.data.Dataset:
        # Nothing is read from a file that cannot be opened: its end element says so.
        everything = tf.where(is_open, tf.constant(-1, tf.int64), tf.constant(0, tf.int64))
        # No buffer_size: TensorFlow's default read-ahead, raised for GCS on Cloud TPU and for
        # S3. (TensorFlow 2.21 logs one INFO line per process either way; a given size would
        # read "the default ... is overridden by the user specified buffer_size", though no
        # user gave one.)
        records = tf.data.TFRecordDataset(path, compression_type=compression)
        # Reading stops at the first unreadable byte; the count below tells that from a clean
        # end.
        readable = records.ignore_errors(log_warning=not raising).take(everything)
        # Each record with an end flag, then one end element: a zip and a concatenation, no
        # function per record.
        flags = tf.data.Dataset.from_tensors((tf.constant(False), is_open)).repeat()
        ends = tf.data.Dataset.from_tensors((tf.constant(""), (tf.constant(True), is_open)))
        return tf.data.Dataset.zip(readable, flags).concatenate(ends)

    stream = opened.flat_map(file_stream)
    unreadable = errors.code("unreadable_file")

    @tf.autograph.experimental.do_not_convert
    def step(state, element):
        index, consumed = state
        payload, (is_end, is_open) = element
        if_gzip = tf.equal(compression, "GZIP")
        seen = tf.where(if_gzip, consumed % 2**32, consumed)
        complete = tf.equal(seen, expected) & is_open
        failed = is_end & ~complete
        detail = tf.cond(
            failed, lambda: _why(path, index, consumed, expected, compression, is_open), str
        )
        length = tf.cast(tf.strings.length(payload), tf.int64) + _FRAMING
        state = (index + 1, consumed + tf.where(is_end, tf.constant(0, tf.int64), length))
        name = record_id(index)
        # The end element of a file read to its end is dropped below.
        keep = ~is_end | failed
        if raising:
            check = tf.debugging.Assert(~failed, [detail])
            with tf.control_dependencies([check]):
                return state, (tf.identity(keep), (name, payload))
        error = tf.where(failed, unreadable, errors.OK)
        return state, (keep, (name, payload, error, detail))

    zero = tf.constant(0, tf.int64)
    # The filter and the map only pick inputs: tf.data runs no function for them, so they cost
    # no hand-off between threads per record as a filter computing its predicate would.
    scanned = stream.scan((zero, zero), step)
    # One lambda a line, with their own argument names: AutoGraph tells them apart by the source.
    kept = scanned.filter(lambda keep, _: keep)
    return map_on_cpu(kept, lambda _, record: record)


def _opens(path: tf.Tensor) -> tf.Tensor:
    """True, or an error where ``path`` cannot be opened and read (its first byte, if any)."""
    first = tf.data.FixedLengthRecordDataset(path, 1, buffer_size=1).take(1)
    return first.reduce(tf.constant(True), lambda opens, _: opens)


def _why(path, index, consumed, expected, compression, is_open) -> tf.Tensor:
    """The message for a file that could not be opened or ended ``expected - consumed`` bytes
    early."""
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
    # The uncompressed size is exact for plain files and intact ZLIB streams; a GZIP trailer
    # read from a damaged file is not.
    exact = plain | (tf.equal(compression, "ZLIB") & tf.not_equal(expected, DAMAGED))
    of = tf.strings.join(
        [" of ", tf.strings.as_string(expected), tf.where(plain, "", " uncompressed bytes")]
    )
    nothing_read = tf.equal(consumed, 0)
    # The first case that holds, else the last message: every text is built (this runs once,
    # for a failed file) by selects rather than a nested branch function per case.
    why = tf.strings.join([of, ": the record is truncated or corrupt (length or CRC mismatch)"])
    cases = [
        (
            ~is_open,
            tf.constant(
                ": cannot be opened (deleted since it was listed, unreadable or not a file)"
            ),
        ),
        (
            plain & nothing_read,
            tf.constant(
                ": not a TFRecord file (GZIP-compressed data needs compression='GZIP' or a "
                "name ending in .gz, ZLIB-compressed data compression='ZLIB')"
            ),
        ),
        (
            ~exact & nothing_read,
            tf.strings.join(
                [
                    ": not ",
                    compression,
                    "-compressed TFRecord data, or truncated or corrupt from its start "
                    "(compression= "
                    "must name the file's: None, 'GZIP' or 'ZLIB')",
                ]
            ),
        ),
        (
            ~exact,
            tf.constant(" of the uncompressed data: the compressed file is truncated or corrupt"),
        ),
        (
            expected - consumed < _HEADER,
            tf.strings.join([of, ": the file ends inside a record header (truncated)"]),
        ),
    ]
    for condition, text in reversed(cases):
        why = tf.where(condition, text, why)
    return tf.strings.join([where, why])
