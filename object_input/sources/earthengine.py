"""Google Earth Engine TFRecord exports: image patches (Example or per-pixel SequenceExample) and
tables (one Example per feature).

Image patches are numbered in export order across all files, so the files are read one after
another in order, numbered, and only then sharded: every worker reads the whole export (skipping
the records of other shards before parsing them) and each patch keeps its global index. For the
same reason a file that cannot be read to its end stops an image export even under
``on_error="skip"``: the patches after the damage could not be numbered. Bad patches and table
rows are flagged (``fields.ERROR``) for the pipeline to raise or skip.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from object_input import fields
from object_input.earthengine import Mixer, buffer_of, pair, patch_bounds
from object_input.options import ReadOptions
from object_input.reliability import errors
from object_input.reliability.errors import RecordChecks, guarded
from object_input.sources import _integrity as integrity
from object_input.sources import _samples as samples
from object_input.sources._base import ReadContext, Source
from object_input.sources._files import PathSource, list_files, read_files
from object_input.tracing.maps import map_on_cpu

SUFFIXES = (".tfrecord", ".tfrecord.gz")
_NUMBERED = re.compile(r"^(?P<prefix>.*)-(?P<number>\d{5})\.tfrecord(\.gz)?$")
_GZIP_MAGIC = b"\x1f\x8b"
_KINDS = {"float_list": tf.float32, "int64_list": tf.int64, "bytes_list": tf.string}


def export_files(prefix_or_files: PathSource) -> tuple[list[str], str | None]:
    """The files of one export in order, and its prefix when the files follow EE's numbering.

    A string that is neither a file, a directory nor a glob is a prefix: ``<prefix>-00000.tfrecord
    [.gz]``, ``-00001`` .... A numbered file missing from the run is an error: every patch after
    it would get a wrong index.
    """
    if (
        isinstance(prefix_or_files, (str, os.PathLike))
        and not set("*?[") & set(os.fspath(prefix_or_files))
        and not tf.io.gfile.exists(os.fspath(prefix_or_files))
    ):
        prefix = os.fspath(prefix_or_files)
        files = sorted(f for f in tf.io.gfile.glob(f"{prefix}-*.tfrecord*") if _NUMBERED.match(f))
        if not files:
            raise FileNotFoundError(
                f"no Earth Engine export files {prefix}-00000.tfrecord.gz (or .tfrecord)"
            )
    else:
        files = list_files(prefix_or_files, SUFFIXES)
    matches = [_NUMBERED.match(f) for f in files]
    if not all(matches):
        return files, None
    prefixes = sorted({m["prefix"] for m in matches})
    if len(prefixes) > 1:
        raise ValueError(
            f"files of several exports ({', '.join(prefixes)}); read one export at a time, since "
            "patch indices continue across the files of one export"
        )
    numbers = [int(m["number"]) for m in matches]
    if len(set(numbers)) != len(numbers):
        raise ValueError(f"export {prefixes[0]} has both .tfrecord and .tfrecord.gz files")
    missing = sorted(set(range(max(numbers) + 1)) - set(numbers))
    if missing:
        raise FileNotFoundError(
            f"export file {prefixes[0]}-{missing[0]:05d}.tfrecord[.gz] is missing: the patches "
            "after it would get wrong indices"
        )
    return files, prefixes[0]


def detect_compression(path: str) -> str:
    """``"GZIP"`` when the file starts with the gzip magic bytes, else ``""``, whatever its name."""
    with tf.io.gfile.GFile(path, "rb") as f:
        return "GZIP" if f.read(2) == _GZIP_MAGIC else ""


def _first_record(files: Sequence[str], codes: Sequence[str]) -> tuple[str, bytes]:
    for path, code in zip(files, codes, strict=True):
        for record in tf.data.TFRecordDataset(path, compression_type=code).take(1):
            return path, record.numpy()
    raise ValueError(f"the export has no records ({files[0]} ...)")


def _reader(files: Sequence[str], codes: Sequence[str], marks: bool):
    """``read(path, record_id)`` for ``read_files(checked=True)``: a file's ``(path, record)``
    pairs, decompressed as detected, and a flag where the file cannot be read to its end."""
    sizes = integrity.expected_sizes(files, codes)

    def read(path: tf.Tensor, record_id: Callable[[tf.Tensor], tf.Tensor]) -> tf.data.Dataset:
        position = tf.argmax(tf.cast(tf.equal(tf.constant(list(files)), path), tf.int32))
        records = integrity.checked_records(
            path,
            tf.gather(tf.constant(sizes, tf.int64), position),
            tf.gather(tf.constant(list(codes)), position),
            marks,
            record_id,
        )
        return map_on_cpu(records, lambda name, record, *mark: (name, (path, record), *mark))

    return read


def _kind(feature: tf.train.Feature, name: str, path: str) -> tf.DType:
    kind = feature.WhichOneof("kind")
    if kind is None:
        raise ValueError(f"{path}: feature {name!r} of the first record is empty")
    return _KINDS[kind]


def _value_count(feature: tf.train.Feature) -> int:
    """Values in a feature's list; for bytes, the bytes (raw uint8 values)."""
    kind = feature.WhichOneof("kind")
    values = getattr(feature, kind).value
    return sum(len(v) for v in values) if kind == "bytes_list" else len(values)


def _missing(what: str, name: str, path: str, present: Sequence[str]) -> ValueError:
    return ValueError(f"{path}: the first record has no {what} {name!r}; it has {sorted(present)}")


def _as_floats(values: Any, dtype: tf.DType) -> tf.Tensor:
    """1-D float32 values of a float, int64 or bytes (raw uint8) list, flat."""
    if dtype == tf.string:
        values = tf.io.decode_raw(tf.strings.reduce_join(values), tf.uint8)
    return tf.cast(tf.reshape(values, [-1]), tf.float32)


class EarthEngine(Source):
    """Image patches of an Earth Engine TFRecord export, in export order.

    Args:
      prefix_or_files: the export prefix (files ``<prefix>-00000.tfrecord.gz``, ``-00001`` ...,
        GZIP or not, told from the bytes), or its files (a glob, directory or list).
      bands: band names in the order of the image's last axis.
      patch_size: ``(height, width)`` of a patch without buffer (Earth Engine's
        ``patchDimensions`` is ``[width, height]``); one int for a square.
      kernel_size: the export's ``kernelSize`` as ``(height, width)``: patches carry ``⌊k/2⌋``
        extra pixels on each side.
      mixer: a :class:`~object_input.earthengine.Mixer` or its path; None uses
        ``<prefix>-mixer.json`` when it exists. It adds ``PATCH_ROW``, ``PATCH_COL`` and
        ``PATCH_BOUNDS`` (exports without a mixer, ``maskedThreshold`` ≠ 1, drop patches, so
        indices then do not place a patch on the grid).
      collapse_bands: the export used ``collapseBands``: all bands in one ``[C, H, W]`` feature
        named after the first band.
      tensor_depths: ``{band: depth}`` of array bands (``tensorDepths``): a band of depth D is a
        ``[D, H, W]`` feature and gives D channels.
      sequence_data: the export used ``sequenceData``: one SequenceExample per pixel (scalar
        bands in the context, array bands as feature lists of ``depth`` values), pixels
        row-major within a buffered patch; they are put back together into patches.

    Each element has ``IMAGE`` float32 ``[H', W', channels]`` (``H'`` with the buffer; array
    bands contribute their depth), ``PATCH_INDEX`` (int64, position in the export) and
    ``RECORD_ID`` ``"<file>:patch <index>"``. A band of the wrong length is an error naming the
    file, patch and band. Not shuffled unless ``shuffle=True`` is asked. The source's
    ``buffered_size`` is ``(H', W')``, ``channels`` the channel count and ``mixer`` the mixer (or
    None), for building a model that fits.
    """

    shuffle_by_default = False

    def __init__(
        self,
        prefix_or_files: PathSource,
        *,
        bands: Sequence[str],
        patch_size: int | Sequence[int],
        kernel_size: int | Sequence[int] = (1, 1),
        mixer: Mixer | str | os.PathLike | None = None,
        collapse_bands: bool = False,
        tensor_depths: Mapping[str, int] | None = None,
        sequence_data: bool = False,
    ):
        if isinstance(bands, str) or not bands or len(set(bands)) != len(bands):
            raise ValueError(f"bands must be a list of distinct band names, got {bands!r}")
        self.bands = list(bands)
        self.patch_size = pair("patch_size", patch_size)
        self.kernel_size = pair("kernel_size", kernel_size)
        buffer_h, buffer_w = buffer_of(self.kernel_size)
        self.buffered_size = (self.patch_size[0] + 2 * buffer_h, self.patch_size[1] + 2 * buffer_w)
        self.depths = {band: 1 for band in self.bands}
        for band, depth in (tensor_depths or {}).items():
            if band not in self.depths:
                raise ValueError(f"tensor_depths names {band!r}, which is not in bands {bands}")
            if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
                raise ValueError(f"tensor_depths[{band!r}] must be a positive int, got {depth!r}")
            self.depths[band] = depth
        self.array_bands = set(tensor_depths or {})
        self.collapse_bands = collapse_bands
        self.sequence_data = sequence_data
        if collapse_bands and sequence_data:
            raise ValueError(
                "collapse_bands with sequence_data is not supported: its per-pixel layout is "
                "not documented"
            )
        self.files, prefix = export_files(prefix_or_files)
        self.codes = [detect_compression(f) for f in self.files]
        if mixer is None and prefix is not None and tf.io.gfile.exists(f"{prefix}-mixer.json"):
            mixer = f"{prefix}-mixer.json"
        if mixer is not None and not isinstance(mixer, Mixer):
            mixer = Mixer.load(mixer)
        if mixer is not None and mixer.patch_size != self.patch_size:
            raise ValueError(
                f"patch_size {self.patch_size} (height, width) does not match the mixer's "
                f"patchDimensions [{mixer.patch_size[1]}, {mixer.patch_size[0]}] (width, height)"
            )
        self.mixer = mixer
        self.dtypes = self._detect_dtypes()

    def _detect_dtypes(self) -> dict[str, tf.DType]:
        """Each feature's list type (float, int64, bytes), from the export's first record."""
        path, record = _first_record(self.files, self.codes)
        names = self.bands[:1] if self.collapse_bands else self.bands
        dtypes = {}
        if self.sequence_data:
            example = tf.train.SequenceExample.FromString(record)
            context = example.context.feature
            lists = example.feature_lists.feature_list
            for name in names:
                if name in self.array_bands:
                    if name not in lists or not lists[name].feature:
                        raise _missing("feature list", name, path, list(lists))
                    dtypes[name] = _kind(lists[name].feature[0], name, path)
                else:
                    if name not in context:
                        raise _missing("context feature", name, path, list(context))
                    dtypes[name] = _kind(context[name], name, path)
        else:
            feature = tf.train.Example.FromString(record).features.feature
            height, width = self.buffered_size
            for name in names:
                if name not in feature:
                    raise _missing("band", name, path, list(feature))
                dtypes[name] = _kind(feature[name], name, path)
                depth = self.channels if self.collapse_bands else self.depths[name]
                found = _value_count(feature[name])
                if found != depth * height * width:
                    # Caught here, before any pipeline runs, with the likely causes.
                    raise ValueError(
                        f"{path}: band {name!r} of the first patch has {found} values, not "
                        f"{depth}×{height}×{width} = {depth * height * width} for patch_size "
                        f"{self.patch_size} and kernel_size {self.kernel_size} (both (height, "
                        "width), buffered by ⌊k/2⌋ each side; Earth Engine's patchDimensions and "
                        "kernelSize are [width, height])"
                    )
        return dtypes

    @property
    def channels(self) -> int:
        """Channels of ``IMAGE``: one per scalar band, ``depth`` per array band."""
        return sum(self.depths.values())

    def records(self, context: ReadContext) -> tf.data.Dataset:
        # One reader, files in order: the position in this stream is the patch index.
        # A damaged file raises whatever on_error says: see the module docstring.
        in_order = ReadContext(reading=ReadOptions(num_readers=1), shuffle=False)
        read = _reader(self.files, self.codes, marks=False)
        stream = read_files(self.files, read, in_order, checked=True)
        stream = map_on_cpu(stream, lambda _, item: item)
        if self.sequence_data:
            stream = stream.batch(self.buffered_size[0] * self.buffered_size[1])
        reading = context.reading
        shard = stream.enumerate().shard(reading.num_shards, reading.shard_index)
        return map_on_cpu(shard, self._with_id)

    def _with_id(self, index: tf.Tensor, item: tuple[tf.Tensor, tf.Tensor]) -> tuple:
        path, serialized = item
        if self.sequence_data:
            path = path[0]
        record_id = tf.strings.join([path, ":patch ", tf.strings.as_string(index)])
        return record_id, (index, serialized)

    def decode(
        self, record_id: tf.Tensor, payload: Any, *, defer_image: bool = False
    ) -> dict[str, tf.Tensor]:
        index, serialized = payload
        checks = RecordChecks(record_id)
        height, width = self.buffered_size
        if self.mixer is not None:
            checks.add(
                index < self.mixer.total_patches,
                "patch_count",
                f"the export has more patches than the mixer totalPatches "
                f"{self.mixer.total_patches}",
            )
        if self.sequence_data:
            planes = self._sequence_planes(serialized, checks)
        else:
            planes = self._example_planes(serialized, checks)

        def build(values: list[tf.Tensor]) -> dict[str, tf.Tensor]:
            image = tf.concat(
                [
                    tf.reshape(flat, [height, width, depth])
                    if layout == "HWD"
                    else tf.transpose(tf.reshape(flat, [depth, height, width]), [1, 2, 0])
                    for flat, (_, depth, layout) in zip(values, planes, strict=True)
                ],
                axis=-1,
            )
            image.set_shape([height, width, self.channels])
            features = {
                fields.IMAGE: image,
                fields.PATCH_INDEX: index,
                fields.RECORD_ID: record_id,
            }
            if self.mixer is not None:
                features[fields.PATCH_ROW] = index // self.mixer.patches_per_row
                features[fields.PATCH_COL] = index % self.mixer.patches_per_row
                features[fields.PATCH_BOUNDS] = patch_bounds(self.mixer, index)
            return features

        # Flagged, not raised: the pipeline raises the message or skips the patch (on_error).
        placeholder = [tf.zeros([depth * height * width]) for _, depth, _ in planes]
        return guarded(checks, errors.FLAG, build, [values for values, _, _ in planes], placeholder)

    def _example_planes(self, serialized: tf.Tensor, checks: RecordChecks) -> list:
        """``(flat values, depth, "DHW")`` per feature of a patch Example, checked."""
        height, width = self.buffered_size
        groups = (
            {self.bands[0]: self.channels}
            if self.collapse_bands
            else {band: self.depths[band] for band in self.bands}
        )
        parsed = tf.io.parse_single_example(
            serialized, {name: tf.io.VarLenFeature(self.dtypes[name]) for name in groups}
        )
        planes = []
        for name, depth in groups.items():
            values = _as_floats(parsed[name].values, self.dtypes[name])
            expected = depth * height * width
            shape = f"{depth}×{height}×{width}" if depth > 1 else f"{height}×{width}"
            checks.add(
                tf.equal(tf.size(values), expected),
                "band_length",
                f"band {name!r} has",
                tf.size(values),
                f"values, expected {expected} ({shape} with the kernel buffer)",
            )
            planes.append((values, depth, "DHW"))
        return planes

    def _sequence_planes(self, serialized: tf.Tensor, checks: RecordChecks) -> list:
        """``(flat values, depth, "HWD")`` per band of a patch's pixel SequenceExamples, checked."""
        height, width = self.buffered_size
        pixels = height * width
        checks.add(
            tf.equal(tf.size(serialized), pixels),
            "patch_count",
            "the export ends inside this patch: it has",
            tf.size(serialized),
            f"pixel records, expected {pixels} ({height}×{width})",
        )
        spec = {band: tf.io.RaggedFeature(self.dtypes[band]) for band in self.bands}
        context, sequences, _ = tf.io.parse_sequence_example(
            serialized,
            context_features={b: s for b, s in spec.items() if b not in self.array_bands},
            sequence_features={b: s for b, s in spec.items() if b in self.array_bands},
        )
        planes = []
        for band in self.bands:
            ragged = sequences[band] if band in self.array_bands else context[band]
            depth = self.depths[band]
            flat = ragged.flat_values
            sizes = (
                tf.strings.length(flat)
                if self.dtypes[band] == tf.string
                else tf.ones_like(flat, tf.int32)
            )
            per_pixel = tf.reduce_sum(
                ragged.with_flat_values(sizes), axis=list(range(1, ragged.shape.rank))
            )
            checks.add(
                tf.reduce_all(tf.equal(per_pixel, depth)),
                "band_length",
                f"band {band!r} has pixels with",
                tf.reduce_min(per_pixel),
                "to",
                tf.reduce_max(per_pixel),
                f"values, expected {depth} per pixel",
            )
            planes.append((_as_floats(flat, self.dtypes[band]), depth, "HWD"))
        return planes

    @classmethod
    def sample(cls, folder: str, damage: int | None = None) -> EarthEngine:
        bands, size = ("B1", "B2"), (2, 3)

        def patch(index: int, length: int = size[0] * size[1]) -> bytes:
            values = tf.train.FloatList(value=[float(index + i) for i in range(length)])
            feature = {band: tf.train.Feature(float_list=values) for band in bands}
            return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()

        patches = [patch(i) for i in range(samples.RECORDS)]
        patches = samples.spoiled(patches, damage, patch(samples.DAMAGED, length=5))
        path = samples.write_tfrecord(os.path.join(folder, "export-00000.tfrecord"), patches)
        return cls(path, bands=list(bands), patch_size=size)

    def __repr__(self) -> str:
        return f"EarthEngine({len(self.files)} files, first {self.files[0]!r}, bands {self.bands})"


class EarthEngineTable(Source):
    """An Earth Engine table export: one Example per feature, properties as lists.

    Args:
      path: the export's file(s) (GZIP or not, told from the bytes): a file, glob or list.
      properties: property names (each a single value), or ``{name: shape}`` where a shape
        ``()`` is a single value and ``(n, ...)`` an array property, row-major.

    Each property becomes a field of its name: float32 from float lists, int64 from int64 lists,
    strings from bytes lists; with ``RECORD_ID`` ``"<file>:<index>"``. A property of the wrong
    length is an error naming the file, record and property.
    """

    # Rows are read through the TFRecord reader's byte accounting, which marks a damaged file.
    marks_read_errors = True

    def __init__(
        self,
        path: PathSource,
        properties: Sequence[str] | Mapping[str, int | Sequence[int]],
    ):
        if isinstance(properties, str) or not properties:
            raise ValueError(f"properties must name at least one property, got {properties!r}")
        if not isinstance(properties, Mapping):
            properties = {name: () for name in properties}
        self.shapes = {
            name: (shape,) if isinstance(shape, int) else tuple(shape)
            for name, shape in properties.items()
        }
        self.files = list_files(path, SUFFIXES)
        self.codes = [detect_compression(f) for f in self.files]
        first, record = _first_record(self.files, self.codes)
        feature = tf.train.Example.FromString(record).features.feature
        self.dtypes = {}
        for name in self.shapes:
            if name not in feature:
                raise _missing("property", name, first, list(feature))
            self.dtypes[name] = _kind(feature[name], name, first)

    def records(self, context: ReadContext) -> tf.data.Dataset:
        read = _reader(self.files, self.codes, context.marks)
        return map_on_cpu(
            read_files(self.files, read, context, checked=True),
            lambda record_id, item, *mark: (record_id, item[1], *mark),
        )

    def decode(
        self, record_id: tf.Tensor, payload: Any, *, defer_image: bool = False
    ) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_single_example(
            payload, {name: tf.io.VarLenFeature(dtype) for name, dtype in self.dtypes.items()}
        )
        checks = RecordChecks(record_id)
        for name, shape in self.shapes.items():
            expected = int(np.prod(shape))
            checks.add(
                tf.equal(tf.size(parsed[name].values), expected),
                "band_length",
                f"property {name!r} has",
                tf.size(parsed[name].values),
                f"values, expected {expected} (shape {shape})",
            )

        def build(values: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
            features = {name: tf.reshape(values[name], s) for name, s in self.shapes.items()}
            return {**features, fields.RECORD_ID: record_id}

        placeholder = {
            name: tf.zeros([int(np.prod(shape))], self.dtypes[name])
            for name, shape in self.shapes.items()
        }
        values = {name: parsed[name].values for name in self.shapes}
        return guarded(checks, errors.FLAG, build, values, placeholder)

    @classmethod
    def sample(cls, folder: str, damage: int | None = None) -> EarthEngineTable:
        def row(values: list[float]) -> bytes:
            feature = tf.train.Feature(float_list=tf.train.FloatList(value=values))
            example = tf.train.Example(features=tf.train.Features(feature={"value": feature}))
            return example.SerializeToString()

        rows = samples.spoiled(
            [row([float(i), 0.5]) for i in range(samples.RECORDS)], damage, row([1.0])
        )
        path = samples.write_tfrecord(os.path.join(folder, "table.tfrecord.gz"), rows, "GZIP")
        return cls(path, {"value": 2})

    def __repr__(self) -> str:
        return f"EarthEngineTable({self.files[0]!r}, properties {list(self.shapes)})"
