"""TFRecord files (plain, GZIP or ZLIB) of detection ``tf.train.Example`` records."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf

from object_input.decoders import ExampleDecoder, deferred_image
from object_input.label_map import LabelMapError, load_label_map, path_beside
from object_input.options import DecodeOptions, build
from object_input.reliability import errors
from object_input.sources import _integrity as integrity
from object_input.sources import _samples as samples
from object_input.sources._base import ReadContext, Source
from object_input.sources._files import PathSource, list_files, read_files
from object_input.sources._resolve import PathOptions, register_format
from object_input.tracing import trace_cache
from object_input.verification import manifest

SUFFIXES = (".tfrecord", ".tfrecords", ".tfrecord.gz", ".tfrecords.gz", ".record", ".record.gz")


def compression_of(path: str, compression: str | None = "auto") -> str:
    """The TFRecord compression of ``path``: explicit, or from a ``.gz`` suffix when ``auto``."""
    if compression == "auto":
        return "GZIP" if path.endswith(".gz") else ""
    if compression not in (None, "", "GZIP", "ZLIB"):
        raise ValueError(f"compression must be 'auto', None, 'GZIP' or 'ZLIB', got {compression!r}")
    return compression or ""


class TFRecord(Source):
    """Detection ``tf.train.Example`` records in TFRecord files.

    Args:
      files: glob pattern, directory, file, or list of those.
      compression: "auto" (GZIP for a ``.gz`` suffix), None, "GZIP" or "ZLIB".
      label_map: text label map path or ``{name: id}``: turns the class names of records that
        carry names into ids, and names the classes (:attr:`label_map`). None: the
        ``label_map.pbtxt`` a converter wrote beside the files, when there is one, names the
        classes (records are decoded as without a label map).
      masks: None, "png" or "numerical": decode instance masks.
      num_keypoints: keypoints per box to decode (0: none).
      decoding: the rarer decoder options (:class:`~object_input.options.DecodeOptions`).

    When every file has a manifest entry that still holds under these decoding settings
    (:mod:`object_input.verification.manifest`, ``DecodeOptions.trust_manifest``), the source is
    :attr:`verified`: records are read and decoded without the per-record checks.
    """

    marks_read_errors = True

    def __init__(
        self,
        files: PathSource,
        *,
        compression: str | None = "auto",
        label_map: str | os.PathLike | Mapping[str, int] | None = None,
        masks: str | None = None,
        num_keypoints: int = 0,
        decoding: DecodeOptions | Mapping[str, Any] | None = None,
    ):
        self.files = list_files(files, SUFFIXES)
        compression_of("", compression)  # validates it
        self.compression = compression
        self.decoding = build(DecodeOptions, "decoding", decoding)
        self.decoder = self._decoder(label_map, masks, num_keypoints, errors.FLAG)
        if label_map is None:
            self.label_map, self.label_map_origin = _label_map_beside(
                self.files, self.decoding.use_display_name
            )
        else:
            self.label_map = self.decoder.label_map
            if not isinstance(label_map, Mapping):
                self.label_map_origin = f"label map {os.fspath(label_map)}"
        if self.decoding.trust_manifest:
            self.verified = manifest.trusted(self.files, self.decoder.settings())
        if self.verified:
            self.decoder = self._decoder(label_map, masks, num_keypoints, errors.NO_CHECKS)
            self.known_records = manifest.record_count(self.files)

    def _decoder(
        self,
        label_map: str | os.PathLike | Mapping[str, int] | None,
        masks: str | None,
        num_keypoints: int,
        checks: str,
    ) -> ExampleDecoder:
        return ExampleDecoder(
            channels=self.decoding.channels,
            label_map=label_map,
            use_display_name=self.decoding.use_display_name,
            masks=masks,
            num_keypoints=num_keypoints,
            multiclass_scores=self.decoding.multiclass_scores,
            unknown_classes=self.decoding.unknown_classes,
            extra_features=self.decoding.extra_features,
            # FLAG: failed checks are flagged, the pipeline raises them or skips the record;
            # NO_CHECKS: verified records.
            checks=checks,
            boxes_out_of_range=self.decoding.boxes_out_of_range,
            max_image_pixels=self.decoding.max_image_pixels,
            large_images=self.decoding.large_images,
        )

    def reader_state(self) -> tuple[tf.lookup.StaticHashTable, tf.lookup.StaticHashTable | None]:
        """Each file's compression and, unless verified, its size as its reader must find it
        (``integrity.DAMAGED``: not readable), as tables keyed by path."""
        compressions = [compression_of(f, self.compression) for f in self.files]
        compression_table = _table(self.files, compressions, "", tf.string)
        if self.verified:
            return compression_table, None
        expected = integrity.expected_sizes(self.files, compressions)
        return compression_table, _table(self.files, expected, integrity.DAMAGED, tf.int64)

    def records(self, context: ReadContext) -> tf.data.Dataset:
        """Records of every file; a file that cannot be read to its end is an error naming it,
        or a mark when ``context.marks`` (see :mod:`object_input.sources._integrity`);
        verified files are read plainly, as ``(record_id, payload)``."""
        compression_table, expected_table = context.state or self.reader_state()
        if expected_table is None:
            # Verified files read to their end: no byte accounting.
            return read_files(
                self.files,
                lambda path: tf.data.TFRecordDataset(path, compression_table.lookup(path)),
                context,
            )

        def read(path: tf.Tensor, record_id: Callable[[tf.Tensor], tf.Tensor]) -> tf.data.Dataset:
            return integrity.checked_records(
                path,
                expected_table.lookup(path),
                compression_table.lookup(path),
                context.marks,
                record_id,
            )

        return read_files(self.files, read, context, checked=True)

    def decode(
        self, record_id: tf.Tensor, payload: Any, *, defer_image: bool = False
    ) -> dict[str, tf.Tensor]:
        # Traced once per decoder settings in a process (object_input.tracing.trace_cache).
        return trace_cache.reused(self.decoder)(payload, record_id, defer_image=defer_image)

    @property
    def can_defer(self) -> bool:
        return self.decoding.defer_decode and self.decoding.channels in (1, 3)

    def realize(
        self, features: dict[str, tf.Tensor], output_size: tuple[int, int] | None = None
    ) -> dict[str, tf.Tensor]:
        dct_min_size = output_size if self.decoding.jpeg_dct_scaling else None
        realize = functools.partial(
            deferred_image.realize, channels=self.decoding.channels, dct_min_size=dct_min_size
        )
        return trace_cache.reused(realize)(features)

    @classmethod
    def sample(cls, folder: str, damage: int | None = None) -> TFRecord:
        from object_input.writers import build_example

        size = {"height": samples.SIDE, "width": samples.SIDE}
        records = [
            build_example(
                samples.png(i), boxes=[samples.BOX], classes=[1], source_id=str(i), **size
            ).SerializeToString()
            for i in range(samples.RECORDS)
        ]
        bad = build_example(samples.NOT_AN_IMAGE, source_id="bad", **size).SerializeToString()
        records = samples.spoiled(records, damage, bad)
        return cls(samples.write_tfrecord(os.path.join(folder, "sample.tfrecord"), records))

    def __repr__(self) -> str:
        return f"TFRecord({len(self.files)} files, first {self.files[0]!r})"


def _from_paths(files: list[str], options: PathOptions) -> TFRecord:
    return TFRecord(
        files,
        compression=options.reading.compression,
        label_map=options.label_map,
        masks=options.masks,
        num_keypoints=options.num_keypoints,
        decoding=options.decoding,
    )


def _label_map_beside(
    files: list[str], use_display_name: bool
) -> tuple[dict[str, int] | None, str | None]:
    """The label map a converter wrote beside ``files`` (``label_map.pbtxt`` in their folders)
    and its origin for messages; None, None where there is none. Folders whose label maps
    disagree are an error naming two of them."""
    found: dict[str, dict[str, int]] = {}
    for path in dict.fromkeys(path_beside(file) for file in files):
        if not tf.io.gfile.exists(path):
            continue
        try:
            found[path] = load_label_map(path, use_display_name)
        except LabelMapError as error:
            raise LabelMapError(
                f"{error} (the label map beside {files[0]}, which names its classes; fix it, "
                "or pass label_map=)"
            ) from error
    if not found:
        return None, None
    (first, first_map), *others = found.items()
    for path, other in others:
        if other != first_map:
            raise ValueError(
                f"the files' folders hold label maps that disagree, {first} and {path}: "
                "read them separately, or pass the label map of all of them as label_map="
            )
    return first_map, f"label map {first}"


def _table(
    keys: list[str], values: list, default: Any, dtype: tf.DType
) -> tf.lookup.StaticHashTable:
    initializer = tf.lookup.KeyValueTensorInitializer(
        tf.constant(keys, tf.string), tf.constant(values, dtype)
    )
    return tf.lookup.StaticHashTable(initializer, tf.constant(default, dtype))


register_format("tfrecord", SUFFIXES, _from_paths)
