"""Fixed-length binary records (``FixedLengthRecordDataset``) and the CIFAR-10/100 presets."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.reliability import errors
from object_input.sources import _samples as samples
from object_input.sources._base import ReadContext, Source
from object_input.sources._files import PathSource, list_files, read_files
from object_input.sources._resolve import register_format

SUFFIXES = (".bin",)
CIFAR_IMAGE_BYTES = 32 * 32 * 3


@dataclasses.dataclass(frozen=True)
class Field:
    """Where one field lies in a record and what it decodes to.

    Attributes:
      offset: first byte of the field within the record.
      dtype: the stored element type (little-endian unless ``little_endian`` is False).
      shape: the stored shape; ``()`` for a scalar.
      chw_to_hwc: the field is a planar ``[C, H, W]`` image: yield it as ``[H, W, C]``.
      cast: the yielded dtype (None: the stored one), e.g. int32 for a label stored as a byte.
      little_endian: byte order of multi-byte elements.
    """

    offset: int
    dtype: tf.DType | str = tf.uint8
    shape: Sequence[int] = ()
    chw_to_hwc: bool = False
    cast: tf.DType | str | None = None
    little_endian: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", tf.as_dtype(self.dtype))
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if self.cast is not None:
            object.__setattr__(self, "cast", tf.as_dtype(self.cast))
        if not isinstance(self.offset, int) or self.offset < 0:
            raise ValueError(f"offset must be an integer >= 0, got {self.offset!r}")
        if any(d < 1 for d in self.shape):
            raise ValueError(f"shape must have positive dimensions, got {self.shape}")
        if self.chw_to_hwc and len(self.shape) != 3:
            raise ValueError(f"chw_to_hwc needs a [C, H, W] shape, got {self.shape}")

    @property
    def num_bytes(self) -> int:
        """Bytes the field takes in the record."""
        return math.prod(self.shape) * self.dtype.size

    def decode(self, record: tf.Tensor) -> tf.Tensor:
        """The field's value from one record's bytes."""
        raw = tf.strings.substr(record, self.offset, self.num_bytes)
        if self.dtype == tf.uint8:
            value = tf.io.decode_raw(raw, tf.uint8)
        else:
            value = tf.io.decode_raw(raw, self.dtype, little_endian=self.little_endian)
        value = tf.reshape(value, self.shape)
        if self.chw_to_hwc:
            value = tf.transpose(value, [1, 2, 0])
        return value if self.cast is None else tf.cast(value, self.cast)


class FixedLength(Source):
    """Files of records that all have ``record_bytes`` bytes, after an optional header.

    Each file's size must be ``header_bytes + k * record_bytes + footer_bytes``; a file that is
    not is an error at construction naming the file and both numbers. Record ids are
    ``"path:index"`` (0-based record index in the file).

    Args:
      files: glob pattern, directory, file, or list of those.
      record_bytes: bytes per record.
      header_bytes, footer_bytes: bytes to skip at the start and end of each file.
      fields: ``{name: Field}`` (or ``(offset, dtype, shape)`` tuples): the record layout. An
        ``IMAGE`` field gets ``IMAGE_SHAPE`` beside it.
    """

    def __init__(
        self,
        files: PathSource,
        *,
        record_bytes: int,
        header_bytes: int = 0,
        footer_bytes: int = 0,
        fields: Mapping[str, Field | Sequence[Any]],
    ):
        for name, value in (
            ("record_bytes", record_bytes),
            ("header_bytes", header_bytes),
            ("footer_bytes", footer_bytes),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        if record_bytes < 1:
            raise ValueError(f"record_bytes must be >= 1, got {record_bytes}")
        if not fields:
            raise ValueError("fields must lay out at least one field: {name: Field(offset, ...)}")
        self.record_bytes = record_bytes
        self.header_bytes = header_bytes
        self.footer_bytes = footer_bytes
        self.fields = {
            name: spec if isinstance(spec, Field) else Field(*spec) for name, spec in fields.items()
        }
        for name, spec in self.fields.items():
            if spec.offset + spec.num_bytes > record_bytes:
                raise ValueError(
                    f"field {name!r} takes bytes {spec.offset}..{spec.offset + spec.num_bytes - 1}"
                    f" but a record has {record_bytes} bytes"
                )
        self.files = list_files(files, SUFFIXES)
        #: records in all the files (before sharding).
        self.num_records = sum(self._count(path) for path in self.files)

    def _count(self, path: str) -> int:
        """The records of file ``path``; a size that is not a whole number of them raises."""
        size = tf.io.gfile.stat(path).length
        body = size - self.header_bytes - self.footer_bytes
        if body < 0 or body % self.record_bytes:
            frame = (
                f" after a {self.header_bytes}-byte header and {self.footer_bytes}-byte footer"
                if self.header_bytes or self.footer_bytes
                else ""
            )
            raise ValueError(
                f"{path}: file size {size} bytes is not a whole number of {self.record_bytes}-byte"
                f" records{frame}; is record_bytes right for this file?"
            )
        return body // self.record_bytes

    def records(self, context: ReadContext) -> tf.data.Dataset:
        def read(path: tf.Tensor) -> tf.data.Dataset:
            return tf.data.FixedLengthRecordDataset(
                path,
                self.record_bytes,
                header_bytes=self.header_bytes,
                footer_bytes=self.footer_bytes,
            )

        return read_files(self.files, read, context)

    def decode(
        self, record_id: tf.Tensor, payload: Any, *, defer_image: bool = False
    ) -> dict[str, tf.Tensor]:
        checks = errors.RecordChecks(record_id)
        length = tf.strings.length(payload)
        checks.add(
            tf.equal(length, self.record_bytes),
            "undecodable",
            "has",
            length,
            f"bytes, expected record_bytes={self.record_bytes}",
        )

        def build(record: tf.Tensor) -> dict[str, tf.Tensor]:
            out = {name: spec.decode(record) for name, spec in self.fields.items()}
            if fields.IMAGE in out:
                out[fields.IMAGE_SHAPE] = tf.shape(out[fields.IMAGE])[:2]
            out[fields.RECORD_ID] = record_id
            return out

        # The reader gives whole records; a payload from elsewhere is flagged, not reshaped.
        return errors.guarded(
            checks, errors.FLAG, build, payload, tf.constant(b"\0" * self.record_bytes)
        )

    @classmethod
    def sample(cls, folder: str, damage: int | None = None) -> FixedLength:
        return cls(
            _cifar_sample(folder, 1, damage),
            record_bytes=1 + CIFAR_IMAGE_BYTES,
            fields={fields.LABEL: Field(0, tf.uint8, cast=tf.int32), fields.IMAGE: _cifar_image(1)},
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({len(self.files)} files, first {self.files[0]!r}, "
            f"record_bytes={self.record_bytes})"
        )


def _cifar_image(offset: int) -> Field:
    return Field(offset, tf.uint8, (3, 32, 32), chw_to_hwc=True)


class CIFAR10(FixedLength):
    """CIFAR-10 binaries: 1 label byte, then 1024 R, 1024 G, 1024 B bytes of a 32×32 image.

    Yields ``IMAGE`` uint8 ``[32, 32, 3]`` and ``LABEL`` int32 (0-9, as stored). Reads
    ``data_batch_*.bin`` and ``test_batch.bin``; a directory contributes its ``.bin`` files.
    """

    def __init__(self, files: PathSource):
        super().__init__(
            files,
            record_bytes=1 + CIFAR_IMAGE_BYTES,
            fields={
                fields.LABEL: Field(0, tf.uint8, cast=tf.int32),
                fields.IMAGE: _cifar_image(1),
            },
        )

    @classmethod
    def sample(cls, folder: str, damage: int | None = None) -> CIFAR10:
        return cls(_cifar_sample(folder, 1, damage))


class CIFAR100(FixedLength):
    """CIFAR-100 binaries: coarse label byte, fine label byte, then the image as in CIFAR-10.

    Yields ``IMAGE`` uint8 ``[32, 32, 3]``, ``LABEL`` int32 (the fine label, 0-99) and
    ``COARSE_LABEL`` int32 (the superclass, 0-19).
    """

    def __init__(self, files: PathSource):
        super().__init__(
            files,
            record_bytes=2 + CIFAR_IMAGE_BYTES,
            fields={
                fields.COARSE_LABEL: Field(0, tf.uint8, cast=tf.int32),
                fields.LABEL: Field(1, tf.uint8, cast=tf.int32),
                fields.IMAGE: _cifar_image(2),
            },
        )

    @classmethod
    def sample(cls, folder: str, damage: int | None = None) -> CIFAR100:
        return cls(_cifar_sample(folder, 2, damage))


def _cifar_sample(folder: str, label_bytes: int, damage: int | None) -> str:
    """A CIFAR binary of ``samples.RECORDS`` flat gray images under ``folder``; ``damage`` (see
    ``Source.sample``) cuts a record short or changes its bytes (any bytes are an image: only a
    file of the wrong size fails, when the source is made)."""
    records = [
        bytes([i] * label_bytes + [40 * i + 20] * CIFAR_IMAGE_BYTES) for i in range(samples.RECORDS)
    ]
    if damage == samples.CERTAIN:
        records[samples.DAMAGED] = records[samples.DAMAGED][:-7]
    elif damage is not None:
        records[samples.DAMAGED] = samples.mutated(records[samples.DAMAGED], damage)
    path = os.path.join(folder, "data_batch_1.bin")
    with open(path, "wb") as f:
        f.write(b"".join(records))
    return path


# ".bin" means CIFAR-10 (registered first, so it wins the shared suffix); CIFAR-100 binaries
# need format="cifar100" or a CIFAR100 source.
register_format("cifar10", SUFFIXES, lambda files, options: CIFAR10(files))
register_format("cifar100", SUFFIXES, lambda files, options: CIFAR100(files))
