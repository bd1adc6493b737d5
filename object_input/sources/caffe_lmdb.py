"""Caffe LMDB databases of ``Datum`` records, as ``convert_imageset`` writes them.

Reading: an LMDB cursor (the ``lmdb`` package, Python) yields ``(key, value)`` bytes; everything
after that runs in the graph: ``tf.io.decode_proto`` with the schema of
:mod:`object_input.sources._caffe_proto`, image decoding or the planar-to-interleaved reshape, and
the BGR-to-RGB swap.

Order: key order, as Caffe reads, unless the pipeline shuffles (``shuffle=True``). Shuffled, the
database is cut into blocks of ``shuffle_block`` consecutive keys; the blocks are visited in a
seeded order drawn anew each epoch, ``num_readers`` of them interleaved record by record, and the
pipeline's record shuffle buffer mixes further. Finding the blocks takes one keys-only pass over
the database (leaf pages only, not the images) and keeps the first key of each block in memory:
``entries / shuffle_block`` keys. Sharding is by key index: worker ``i`` of ``n`` reads the
records whose index in key order is ``i`` modulo ``n`` (and skips the others without reading
their values).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow as tf
from google.protobuf.message import DecodeError

from object_input import fields
from object_input.reliability import errors
from object_input.sources import _caffe_proto as caffe_proto
from object_input.sources import _samples as samples
from object_input.sources._base import ReadContext, Source
from object_input.tracing.maps import map_on_cpu

INSTALL_HINT = "pip install object-input[lmdb]"

_DTYPES = {
    "channels": tf.int32,
    "height": tf.int32,
    "width": tf.int32,
    "data": tf.string,
    "label": tf.int32,
    "float_data": tf.float32,
    "encoded": tf.bool,
}
# Records per generator round trip.
_CHUNK = 64
# Open environments by real path.
_ENVIRONMENTS: dict[str, Any] = {}
# An AnnotatedDatum starts with its Datum: field 1, length-delimited. A Datum's field 1
# (channels) is a varint, and its other fields have other numbers.
ANNOTATED_MARK = b"\x0a"
# The encodings OpenCV (Caffe's decoder) and tf.io.decode_image both read.
_MAGIC = (b"\xff\xd8\xff", b"\x89PNG", b"BM")


class AnnotatedDatabaseError(ValueError):
    """A database of ``AnnotatedDatum`` records given to :class:`CaffeLMDB`."""


def _import_lmdb() -> Any:
    try:
        import lmdb
    except ImportError:
        raise ImportError(
            f"CaffeLMDB reads LMDB databases with the lmdb package: {INSTALL_HINT}"
        ) from None
    return lmdb


class CaffeLMDB(Source):
    """A Caffe LMDB database of ``Datum`` records (raw planar BGR pixels or encoded images).

    Yields ``IMAGE`` uint8 ``[H, W, C]``, ``IMAGE_SHAPE``, ``LABEL`` (int32), ``FLOAT_DATA``
    (float32 ``[D]``, when the first record has float data), ``KEY`` (the LMDB key),
    ``RECORD_ID`` (``"<path>:<key>"``) and, for 3-channel images, ``CHANNEL_ORDER`` ("RGB" or
    "BGR", as ``bgr_to_rgb`` made them: ``caffe_transform`` orders its means by it). A
    database whose records hold no pixels (features written as ``float_data`` only) yields no
    image. Reading the first record when the source is made fixes these and the channel count; a
    later record that disagrees is an error naming its key.

    Args:
      path: the database directory (holding ``data.mdb``) or the data file itself.
      bgr_to_rgb: reverse 3-channel images from Caffe's BGR order to RGB; False keeps the
        channels as Caffe sees them (BGR, encoded images too).
      channels: the channel count of every image; None takes the first record's. Encoded images
        are decoded to it (1: libjpeg's grayscale, as Caffe's ``force_gray`` decodes JPEG).
      shuffle_block: consecutive keys read together when shuffling (see the module docstring).
    """

    # The message each record holds (a subclass reads another that wraps a Datum).
    message = "Datum"
    # As Caffe's Data layer: key order (convert_imageset --shuffle shuffles when writing).
    shuffle_by_default = False
    # The cursor is a Python generator of this process: no tf.data service workers.
    serializable = False

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        bgr_to_rgb: bool = True,
        channels: int | None = None,
        shuffle_block: int = 256,
    ):
        self._lmdb = _import_lmdb()
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise FileNotFoundError(f"no LMDB database at {self.path!r}")
        if channels is not None and channels < 1:
            raise ValueError(f"channels must be >= 1 or None, got {channels!r}")
        if not isinstance(shuffle_block, int) or shuffle_block < 1:
            raise ValueError(f"shuffle_block must be an integer >= 1, got {shuffle_block!r}")
        self.bgr_to_rgb = bgr_to_rgb
        self.shuffle_block = shuffle_block
        self._starts: list[bytes] | None = None
        with self.env().begin() as txn:
            self.num_records = txn.stat()["entries"]
            cursor = txn.cursor()
            if not cursor.first():
                raise ValueError(f"LMDB database {self.path} is empty")
            key, value = cursor.key(), cursor.value()
        datum = self._datum_of(self._parse(key, value))
        self.has_image = len(datum.data) > 0
        self.has_float_data = len(datum.float_data) > 0
        if channels is None and self.has_image:
            channels = self._channels_of(datum, key)
        self.channels = channels

    def env(self) -> Any:
        """The read-only LMDB environment (one per database and process: LMDB allows no more)."""
        real = os.path.realpath(self.path)
        if real not in _ENVIRONMENTS:
            try:
                _ENVIRONMENTS[real] = self._lmdb.open(
                    real, readonly=True, lock=False, subdir=os.path.isdir(real)
                )
            except self._lmdb.Error as error:
                raise ValueError(f"{self.path} is not an LMDB database: {error}") from None
        return _ENVIRONMENTS[real]

    def _parse(self, key: bytes, value: bytes) -> Any:
        """``value`` as a Python message; a ValueError naming the key when it is not one."""
        if self.message == "Datum" and value[:1] == ANNOTATED_MARK:
            raise AnnotatedDatabaseError(
                f"{self.path}: the record at key {key!r} is an AnnotatedDatum (Caffe SSD's "
                "create_annoset); read the database with CaffeAnnotatedLMDB"
            )
        try:
            return caffe_proto.message_class(self.message).FromString(value)
        except DecodeError as error:
            raise ValueError(
                f"{self.path}: the record at key {key!r} is not a Caffe {self.message} ({error})"
            ) from None

    @staticmethod
    def _datum_of(message: Any) -> Any:
        """The Datum of a parsed record."""
        return message

    def _channels_of(self, datum: Any, key: bytes) -> int:
        if not datum.encoded:
            return int(datum.channels)
        try:
            image = tf.io.decode_image(datum.data, expand_animations=False)
        except tf.errors.InvalidArgumentError as error:
            raise ValueError(
                f"{self.path}: the encoded image at key {key!r} cannot be decoded ({error.message})"
            ) from None
        # OpenCV's IMREAD_ANYCOLOR drops alpha: gray+alpha is gray, RGBA is colour.
        return {1: 1, 2: 1, 3: 3, 4: 3}[int(image.shape[-1])]

    # --- reading ---------------------------------------------------------------------------

    def _entries(self, start: int, first_key: bytes, count: int, shards: int, shard: int):
        """``(key, value, is_datum)`` of records ``start .. start + count - 1`` in key order
        (``count`` -1: to the end) whose index is ``shard`` modulo ``shards``; ``first_key`` is
        record ``start``'s key. A value that is not a :attr:`message` comes as ``b""``,
        ``is_datum`` False."""
        with self.env().begin(buffers=False) as txn:
            cursor = txn.cursor()
            if not cursor.set_range(first_key):
                return
            index = start
            for key in cursor.iternext(keys=True, values=False):
                if count >= 0 and index >= start + count:
                    return
                if index % shards == shard:
                    value = cursor.value()
                    # tf.io.decode_proto would fail without naming the record: flag it instead.
                    is_datum = _parses(self.message, value)
                    yield key, value if is_datum else b"", is_datum
                index += 1

    def block_starts(self) -> list[bytes]:
        """The first key of every block of ``shuffle_block`` records (one keys-only pass)."""
        if self._starts is None:
            with self.env().begin() as txn:
                keys = txn.cursor().iternext(keys=True, values=False)
                self._starts = [k for i, k in enumerate(keys) if i % self.shuffle_block == 0]
        return self._starts

    def records(self, context: ReadContext) -> tf.data.Dataset:
        reading = context.reading
        shards, shard = reading.num_shards, reading.shard_index
        # Chunks of records per generator call: one Python round trip each, not one per record.
        signature = (
            tf.TensorSpec([None], tf.string),
            tf.TensorSpec([None], tf.string),
            tf.TensorSpec([None], tf.bool),
        )
        if not context.shuffle:
            entries = tf.data.Dataset.from_generator(
                lambda: _chunks(self._entries(0, b"", -1, shards, shard)),
                output_signature=signature,
            )
            # The cursor reads ahead while the records before are decoded.
            entries = entries.prefetch(2).unbatch()
        else:
            starts = self.block_starts()
            size = self.shuffle_block

            def block(index: np.int64):
                index = int(index)
                return _chunks(self._entries(index * size, starts[index], size, shards, shard))

            blocks = context.shuffled(tf.data.Dataset.range(len(starts)), len(starts))
            entries = blocks.interleave(
                lambda index: tf.data.Dataset.from_generator(
                    block, args=(index,), output_signature=signature
                ).unbatch(),
                cycle_length=max(1, min(reading.num_readers, len(starts))),
                block_length=1,
            )
        prefix = self.path + ":"
        return map_on_cpu(
            entries,
            lambda key, value, is_datum: (tf.strings.join([prefix, key]), (key, value, is_datum)),
        )

    # --- decoding --------------------------------------------------------------------------

    def decode(
        self, record_id: tf.Tensor, payload: Any, *, defer_image: bool = False
    ) -> dict[str, tf.Tensor]:
        """The record's fields; a bad record is flagged (``ERROR``, ``ERROR_DETAIL`` naming its
        key and field) with placeholder values, for the pipeline to raise or skip."""
        key, value, is_datum = payload
        checks = errors.RecordChecks(record_id)
        checks.add(is_datum, "undecodable", "the value is not a Caffe Datum message")
        return checks.flag(self._datum_fields(record_id, key, value, checks))

    def _datum_fields(
        self, record_id: tf.Tensor, key: tf.Tensor, value: tf.Tensor, checks: errors.RecordChecks
    ) -> dict[str, tf.Tensor]:
        """The fields of the serialized Datum ``value``, its checks added to ``checks``."""
        sizes, values = tf.io.decode_proto(
            tf.reshape(value, [1]),
            "caffe.Datum",
            list(_DTYPES),
            list(_DTYPES.values()),
            descriptor_source=caffe_proto.DESCRIPTOR_SOURCE,
        )
        datum = {name: values[i][0, : sizes[0, i]] for i, name in enumerate(_DTYPES)}
        out = {
            fields.KEY: key,
            fields.RECORD_ID: record_id,
            fields.LABEL: _scalar(datum["label"], 0),
        }
        if self.has_float_data:
            out[fields.FLOAT_DATA] = datum["float_data"]
        if self.has_image:
            image = self._image(datum, checks)
            out[fields.IMAGE] = image
            out[fields.IMAGE_SHAPE] = tf.shape(image)[:2]
            if self.channels == 3:
                out[fields.CHANNEL_ORDER] = tf.constant("RGB" if self.bgr_to_rgb else "BGR")
        return out

    def _image(self, datum: dict[str, tf.Tensor], checks: errors.RecordChecks) -> tf.Tensor:
        """The pixels, once ``checks`` hold; a 1 × 1 black image otherwise."""
        data = _scalar(datum["data"], "")
        encoded = _scalar(datum["encoded"], False)
        shape = tf.stack([_scalar(datum[n], 0) for n in ("channels", "height", "width")])
        length = tf.strings.length(data)
        present = checks.add(length > 0, "no_image", "field data: the Datum holds no pixels")
        head = tf.strings.substr(data, 0, 4)
        is_image = tf.reduce_any([tf.strings.substr(head, 0, len(m)) == m for m in _MAGIC])
        checks.add(
            ~present | ~encoded | is_image,
            "not_an_image",
            "field data (encoded: true) is not a JPEG, PNG or BMP image",
        )
        pixels = tf.cast(shape[1], tf.int64) * tf.cast(shape[2], tf.int64)
        checks.add(
            encoded
            | (
                tf.equal(shape[0], self.channels)
                & tf.reduce_all(shape[1:] > 0)
                & tf.equal(pixels * self.channels, tf.cast(length, tf.int64))
            ),
            "image_size",
            "fields channels, height, width =",
            shape,
            f"must have channels {self.channels} and give the size of field data:",
            length,
            "bytes",
        )
        black = (
            tf.constant(b"\0" * self.channels),
            tf.constant(False),
            tf.constant([self.channels, 1, 1]),
        )
        ok = tf.equal(checks.error_code(), errors.OK)
        # Select the inputs, not the outputs: the decoding is traced once.
        data, encoded, shape = tf.cond(ok, lambda: (data, encoded, shape), lambda: black)
        image = tf.cond(
            encoded, lambda: self._decode_encoded(data), lambda: _planar_to_hwc(data, shape)
        )
        image = tf.ensure_shape(image, [None, None, self.channels])
        # Raw pixels are BGR; decoded ones RGB. Reverse whichever differs from the ask.
        swap = encoded if not self.bgr_to_rgb else ~encoded
        if self.channels == 3:
            image = tf.cond(swap, lambda: tf.reverse(image, [2]), lambda: image)
        return image

    def _decode_encoded(self, data: tf.Tensor) -> tf.Tensor:
        return tf.io.decode_image(data, channels=self.channels, expand_animations=False)

    @classmethod
    def sample(cls, folder: str, damage: int | None = None) -> CaffeLMDB:
        lmdb = _import_lmdb()
        values = [cls._sample_record(i) for i in range(samples.RECORDS)]
        values = samples.spoiled(values, damage, cls._sample_record(samples.DAMAGED, spoiled=True))
        path = os.path.join(folder, "db")
        env = lmdb.open(path, map_size=1 << 24)
        with env.begin(write=True) as txn:
            for index, value in enumerate(values):
                txn.put(f"{index:05d}".encode(), value)
        env.close()
        return cls(path)

    @classmethod
    def _sample_record(cls, index: int, spoiled: bool = False) -> bytes:
        """Record ``index`` of a :meth:`sample`; ``spoiled``: its pixel data a byte short."""
        return sample_datum(index, spoiled).SerializeToString()

    def __repr__(self) -> str:
        return f"CaffeLMDB({self.path!r}, {self.num_records} records)"


def _chunks(entries: Iterator[tuple[Any, ...]], size: int = _CHUNK):
    """Lists of up to ``size`` entries at a time, one list per entry item."""
    while True:
        chunk = list(itertools.islice(entries, size))
        if not chunk:
            return
        yield tuple(list(items) for items in zip(*chunk, strict=True))


def _parses(message: str, value: bytes) -> bool:
    """Whether ``value`` parses as a ``message`` (upb: about 1 µs for a CIFAR-sized Datum)."""
    try:
        caffe_proto.message_class(message).FromString(value)
    except DecodeError:
        return False
    return True


def _planar_to_hwc(data: tf.Tensor, shape: tf.Tensor) -> tf.Tensor:
    """Raw Datum pixels (uint8 C × H × W, planar) as ``[H, W, C]``."""
    return tf.transpose(tf.reshape(tf.io.decode_raw(data, tf.uint8), shape), [1, 2, 0])


def _scalar(values: tf.Tensor, default: Any) -> tf.Tensor:
    """The value of an optional field from ``decode_proto`` (a vector of 0 or 1 items)."""
    return tf.concat([values, tf.constant([default], values.dtype)], 0)[0]


def sample_datum(index: int, spoiled: bool = False) -> Any:
    """A raw ``Datum`` of sample record ``index`` (planar pixels), ``spoiled`` a byte short."""
    planar = samples.pixels(index).transpose(2, 0, 1).tobytes()
    return caffe_proto.message_class("Datum")(
        channels=3,
        height=samples.SIDE,
        width=samples.SIDE,
        data=planar[:-1] if spoiled else planar,
        label=index,
    )
