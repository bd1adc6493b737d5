"""Look inside TFRecord files: record count, the feature schema, image sizes, boxes and classes.

Records are read one by one, outside any pipeline, so that a damaged file is reported with its
path and record index instead of stopping the reading: a truncated file or a CRC mismatch ends
that file's reading (the rest of it cannot be framed) and is listed, found by the byte count of
the pipeline's reader (:mod:`object_input.sources._integrity`, GZIP and ZLIB files too); a
record that is not a ``tf.train.Example``, or whose image does not decode in full (a JPEG cut
before its end marker among them: :mod:`object_input.decoders.image_files`, the converters'
check), is listed and skipped. Each feature key is reported with the field it decodes into and,
where its values are not of the kind the decoder parses, that kind (from
:data:`object_input.schema.EXAMPLE`).

:func:`object_input.verification.verify.verify_files` decodes every record through the
pipeline's own checks instead.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import tensorflow as tf
from google.protobuf.message import DecodeError

from object_input import schema, wording
from object_input.decoders.image_files import ImageError, decode_image_file
from object_input.label_map import LabelMapSource, label_map_to_names, load_label_map, path_beside
from object_input.reliability import errors
from object_input.sources._files import list_files
from object_input.sources._integrity import checked_records, expected_bytes
from object_input.sources.tfrecord import SUFFIXES, compression_of

_KINDS = {feature_list: kind for kind, feature_list in schema.FEATURE_LISTS.items()}


@dataclasses.dataclass(frozen=True)
class CorruptRecord:
    """A record that could not be read or parsed."""

    file: str
    index: int
    error: str


@dataclasses.dataclass
class FeatureStats:
    """How one feature key appears across the records."""

    types: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    records: int = 0
    min_length: int | None = None
    max_length: int = 0

    def add(self, kind: str, length: int) -> None:
        self.types[kind] += 1
        self.records += 1
        self.min_length = length if self.min_length is None else min(self.min_length, length)
        self.max_length = max(self.max_length, length)

    @property
    def shape(self) -> str:
        """``[n]`` when every record has n values, else ``[min..max]``."""
        if self.min_length == self.max_length:
            return f"[{self.max_length}]"
        return f"[{self.min_length}..{self.max_length}]"

    @property
    def type(self) -> str:
        return "|".join(sorted(self.types))

    def schema_entry(self, key: str) -> dict[str, Any]:
        """``key``'s place in the detection schema: the field it decodes into (None outside
        the schema) and, when some records hold another kind of values, the kind expected."""
        entry = schema.BY_KEY.get(key)
        if entry is None:
            return {"field": None}
        kinds = {schema.kind_of(entry, masks) for masks in schema.MASK_KINDS}
        if set(self.types) - kinds - {"empty"}:
            return {"field": entry.field, "expected": "|".join(sorted(kinds))}
        return {"field": entry.field}


def iterate_records(files: Sequence[str]) -> Iterator[tuple[str, int, bytes | CorruptRecord]]:
    """``(file, index, serialized record or CorruptRecord)`` for every record of ``files``.

    Each file is read to its end with the pipeline's byte accounting
    (:func:`object_input.sources._integrity.checked_records`; GZIP and ZLIB files included): a
    file that cannot be, truncated or damaged, ends in one :class:`CorruptRecord` saying where
    and why.
    """
    for path in files:
        compression = compression_of(path)
        expected = tf.constant(expected_bytes(path, compression), tf.int64)
        marked = checked_records(
            tf.constant(path), expected, compression, marks=True, record_id=_index_text
        )
        for index, (_, payload, error, detail) in enumerate(marked):
            if error != errors.OK:
                # The record's file and index lead the report's line already.
                why = detail.numpy().decode(errors="replace").removeprefix(f"file {path}: ")
                yield path, index, CorruptRecord(path, index, why)
            else:
                yield path, index, payload.numpy()


def _index_text(index: tf.Tensor) -> tf.Tensor:
    """A record's id: its index in its file, as text. (A function of this package: the stages
    of the reading are kept for the next file and process, :mod:`object_input.tracing`.)"""
    return tf.strings.as_string(index)


def _image_size(example: Mapping[str, Any]) -> tuple[int, int] | None:
    """(height, width) from image/height and image/width, else from the PNG or JPEG header."""
    height = _values(example, schema.HEIGHT)
    width = _values(example, schema.WIDTH)
    if height and width and height[0] > 0 and width[0] > 0:
        return int(height[0]), int(width[0])
    encoded = _values(example, schema.ENCODED)
    if not encoded:
        return None
    data = encoded[0]
    if data.startswith(b"\x89PNG") and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return height, width
    if data.startswith(b"\xff\xd8\xff"):
        try:
            shape = tf.io.extract_jpeg_shape(data).numpy()
        except tf.errors.OpError:
            return None
        return int(shape[0]), int(shape[1])
    return None


def image_problem(example: Mapping[str, Any]) -> str | None:
    """Why the image of a record's features does not decode in full, or None when it does, or
    when there is no image or it is raw pixels (``image/format`` ``raw``)."""
    encoded = _values(example, schema.ENCODED)
    formats = _values(example, schema.FORMAT)
    if not encoded or not encoded[0] or (formats and formats[0].lower() == b"raw"):
        return None
    try:
        decode_image_file(encoded[0])
    except ImageError as err:
        return f"{schema.ENCODED}: {err}"
    return None


def _values(example: Mapping[str, Any], key: str) -> list:
    feature = example.get(key)
    if feature is None:
        return []
    kind = feature.WhichOneof("kind")
    return list(getattr(feature, kind).value) if kind else []


@dataclasses.dataclass
class Report:
    """What :func:`inspect_records` found; ``to_dict`` for JSON, ``format`` for people."""

    files: list[str]
    num_records: int = 0
    records_per_file: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    features: dict[str, FeatureStats] = dataclasses.field(default_factory=dict)
    image_sizes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    image_formats: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    boxes_per_image: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    class_counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    image_class_counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    class_names: dict[Any, str] = dataclasses.field(default_factory=dict)
    # (id, name) -> where it was first seen: (file, record index), or (label map, None).
    class_places: dict[tuple[int, str], tuple[str, int | None]] = dataclasses.field(
        default_factory=dict
    )
    # (id, display name) -> (id, name) of a label map item: the same class under either.
    class_aliases: dict[tuple[int, str], tuple[int, str]] = dataclasses.field(default_factory=dict)
    keypoints_per_box: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    corrupt: list[CorruptRecord] = dataclasses.field(default_factory=list)

    def add(self, example: Mapping[str, Any], file: str, index: int) -> None:
        """Count the features of record ``index`` of ``file``."""
        self.num_records += 1
        for key, feature in example.items():
            kind = feature.WhichOneof("kind")
            values = getattr(feature, kind).value if kind else ()
            self.features.setdefault(key, FeatureStats()).add(
                _KINDS.get(kind, "empty"), len(values)
            )
        size = _image_size(example)
        if size:
            self.image_sizes[size] += 1
        formats = _values(example, schema.FORMAT)
        if formats:
            self.image_formats[formats[0].decode(errors="replace").lower()] += 1
        num_boxes = len(_values(example, schema.BOX_KEYS[0]))
        self.boxes_per_image[num_boxes] += 1
        for counts, label_key, text_key in (
            (self.class_counts, schema.CLASS_LABEL, schema.CLASS_TEXT),
            (self.image_class_counts, schema.IMAGE_CLASS_LABEL, schema.IMAGE_CLASS_TEXT),
        ):
            texts = [t.decode(errors="replace") for t in _values(example, text_key)]
            self._count_classes(counts, _values(example, label_key), texts, (file, index))
        points = len(_values(example, schema.KEYPOINT_Y))
        if num_boxes and points:
            self.keypoints_per_box[points // num_boxes] += 1

    def _count_classes(
        self,
        counts: collections.Counter,
        labels: list,
        texts: list,
        place: tuple[str, int | None],
    ) -> None:
        keys = labels or texts
        counts.update(keys)
        if labels and len(texts) == len(labels):
            for label, text in zip(labels, texts, strict=True):
                self.class_names.setdefault(label, text)
                self.class_places.setdefault((label, text), place)

    def add_label_map(self, label_map: LabelMapSource, where: str) -> None:
        """Take the id-name pairs of ``label_map`` (found at ``where``) among those compared
        by :meth:`class_conflicts`; an item's ``display_name`` names its class as well."""
        names = {id_: name for name, id_ in load_label_map(label_map).items()}
        for id_, name in names.items():
            self.class_places.setdefault((id_, name), (where, None))
        for label, id_ in load_label_map(label_map, use_display_name=True).items():
            if label != names[id_]:
                self.class_aliases[(id_, label)] = (id_, names[id_])

    def class_conflicts(self) -> list[dict[str, Any]]:
        """The class ids given more than one name, and the names given more than one id, by
        the records and label maps read: ``{"id": 1, "names": {name: where}}`` and
        ``{"name": "car", "ids": {id: where}}``, ``where`` the first file (``file:index``
        where one file holds both sides) that gave each."""
        by_id: dict[int, dict[str, tuple[str, int | None]]] = {}
        by_name: dict[str, dict[int, tuple[str, int | None]]] = {}
        for pair, place in self.class_places.items():
            id_, name = self.class_aliases.get(pair, pair)
            by_id.setdefault(id_, {}).setdefault(name, place)
            by_name.setdefault(name, {}).setdefault(id_, place)
        conflicts: list[dict[str, Any]] = [
            {"id": id_, "names": _where(names)}
            for id_, names in sorted(by_id.items())
            if len(names) > 1
        ]
        conflicts.extend(
            {"name": name, "ids": _where(ids)}
            for name, ids in sorted(by_name.items())
            if len(ids) > 1
        )
        return conflicts

    @property
    def num_boxes(self) -> int:
        return sum(n * count for n, count in self.boxes_per_image.items())

    def masks(self) -> str | None:
        """How masks are stored: ``"png"``, ``"numerical"`` or None."""
        stats = self.features.get(schema.MASK)
        if stats is None:
            return None
        if "bytes" in stats.types:
            return "png"
        return "numerical" if "float" in stats.types else None

    def num_keypoints(self) -> int:
        """Keypoints per box (the most common count), 0 without keypoints."""
        if not self.keypoints_per_box:
            return 0
        return self.keypoints_per_box.most_common(1)[0][0]

    def to_dict(self) -> dict[str, Any]:
        heights = [h for (h, _), n in self.image_sizes.items() for _ in range(n)]
        widths = [w for (_, w), n in self.image_sizes.items() for _ in range(n)]
        boxes = [k for k, n in self.boxes_per_image.items() for _ in range(n)]
        return {
            "files": self.files,
            "num_records": self.num_records,
            "records_per_file": {f: self.records_per_file[f] for f in self.files},
            "num_corrupt": len(self.corrupt),
            "features": {
                key: {
                    "type": stats.type,
                    "shape": stats.shape,
                    "records": stats.records,
                    **stats.schema_entry(key),
                }
                for key, stats in sorted(self.features.items())
            },
            "image_size": {
                "height": _summary(heights),
                "width": _summary(widths),
                "most_common": [
                    {"height": h, "width": w, "count": n}
                    for (h, w), n in self.image_sizes.most_common(5)
                ],
                "formats": dict(self.image_formats.most_common()),
            },
            "boxes_per_image": dict(
                _summary(boxes),
                total=self.num_boxes,
                images_without_boxes=self.boxes_per_image.get(0, 0),
            ),
            "classes": self._classes(self.class_counts),
            "image_classes": self._classes(self.image_class_counts),
            "masks": self.masks(),
            "num_keypoints": self.num_keypoints(),
            "corrupt_records": [dataclasses.asdict(c) for c in self.corrupt],
            "class_conflicts": self.class_conflicts(),
        }

    def _classes(self, counts: collections.Counter) -> list[dict[str, Any]]:
        return [
            {"id": key, "name": self.class_names.get(key), "count": n}
            if isinstance(key, int)
            else {"id": None, "name": key, "count": n}
            for key, n in sorted(counts.items(), key=lambda kv: (str(type(kv[0])), kv[0]))
        ]

    def format(self) -> str:
        """A plain-text report."""
        data = self.to_dict()
        lines = [
            f"{wording.count(len(self.files), 'file')}, "
            f"{wording.count(self.num_records, 'record')}, {len(self.corrupt)} corrupt"
        ]
        counts = [self.records_per_file[f] for f in self.files]
        if len(counts) > 1:
            lines.append(f"records per file: min {min(counts)}, max {max(counts)}")
        if self.features:
            lines.append(
                f"features (type, values per record, records having it of {self.num_records},"
                " field decoded into):"
            )
            width = max(len(key) for key in self.features)
            for key, info in data["features"].items():
                expected = f" (the decoder parses {info['expected']})" if "expected" in info else ""
                lines.append(
                    f"  {key:{width}s}  {info['type']:6s} {info['shape']:10s} "
                    f"{info['records']:<5} {info['field'] or '-'}{expected}"
                )
        size = data["image_size"]
        if size["height"]:
            common = ", ".join(
                f"{s['width']}x{s['height']} ({s['count']})" for s in size["most_common"]
            )
            formats = ", ".join(f"{k} {v}" for k, v in size["formats"].items())
            lines.append(
                f"image size: height {_text(size['height'])}; width {_text(size['width'])}; "
                f"most common (width x height): {common}"
                + (f"; formats: {formats}" if formats else "")
            )
        boxes = data["boxes_per_image"]
        if boxes:
            lines.append(
                f"boxes per image: {_text(boxes)}; {wording.count(boxes['total'], 'box')}, "
                f"{wording.count(boxes['images_without_boxes'], 'image')} without boxes"
            )
        for title, classes in (
            ("classes (boxes)", data["classes"]),
            ("image classes", data["image_classes"]),
        ):
            if classes:
                lines.append(f"{title}:")
                lines.extend(
                    f"  {c['id'] if c['id'] is not None else '-':>5} {c['name'] or '':20s} "
                    f"{c['count']}"
                    for c in classes
                )
        if data["masks"]:
            lines.append(f"masks: {data['masks']}")
        if data["num_keypoints"]:
            lines.append(f"keypoints per box: {data['num_keypoints']}")
        if self.corrupt:
            lines.append("corrupt records:")
            lines.extend(f"  {c.file}:{c.index}: {c.error}" for c in self.corrupt)
        if data["class_conflicts"]:
            lines.append(
                "class ids and names disagree (different label maps: read together, their "
                "classes mix):"
            )
            lines.extend(f"  {_conflict_text(c)}" for c in data["class_conflicts"])
        return "\n".join(lines)


def _where(given: Mapping[Any, tuple[str, int | None]]) -> dict[Any, str]:
    """Each key's place as text: its file, or ``file:index`` where one file gives two keys."""
    files = collections.Counter(file for file, _ in given.values())
    return {
        key: file if index is None or files[file] == 1 else f"{file}:{index}"
        for key, (file, index) in given.items()
    }


def _conflict_text(conflict: Mapping[str, Any]) -> str:
    """``class id 1 is 'aeroplane' in a.tfrecord but 'car' in b.tfrecord``."""
    if "id" in conflict:
        subject, given = f"class id {conflict['id']} is", conflict["names"]
        parts = [f"{name!r} in {where}" for name, where in given.items()]
    else:
        subject, given = f"class {conflict['name']!r} is", conflict["ids"]
        parts = [f"id {id_} in {where}" for id_, where in given.items()]
    return f"{subject} {parts[0]} but {', '.join(parts[1:])}"


def _summary(values: list) -> dict[str, float]:
    if not values:
        return {}
    return {"min": min(values), "mean": round(sum(values) / len(values), 2), "max": max(values)}


def _text(summary: Mapping[str, float]) -> str:
    return f"min {summary['min']}, mean {summary['mean']}, max {summary['max']}"


def inspect_records(
    source: str | os.PathLike | Sequence[str | os.PathLike],
    limit: int | None = None,
    label_map: LabelMapSource | None = None,
    decode_images: bool = True,
) -> Report:
    """Read the TFRecords of ``source`` (glob, folder, files) and summarize them.

    ``limit`` stops after that many records (corrupt ones included). ``label_map`` (a text label
    map path or ``{name: id}``) names the class ids; otherwise a ``label_map.pbtxt`` beside the
    files does, and then ``class/text``. Where these label maps and the records' ``class/label``
    and ``class/text`` pairs give an id two names, or a name two ids, the report's
    :meth:`~Report.class_conflicts` say where. ``decode_images`` decodes every record's image in
    full and lists those that fail among the corrupt records (False: only the headers are
    read, for the sizes).
    """
    files = list_files(source, SUFFIXES)
    report = Report(files=files)
    if label_map is not None:
        report.class_names.update(label_map_to_names(label_map))
        where = "the label map given" if isinstance(label_map, Mapping) else os.fspath(label_map)
        report.add_label_map(label_map, where)
    for beside in sorted({path_beside(path) for path in files}):
        if tf.io.gfile.exists(beside):
            for id_, name in label_map_to_names(beside).items():
                report.class_names.setdefault(id_, name)
            report.add_label_map(beside, beside)
    for path, index, record in iterate_records(files):
        if limit is not None and report.num_records + len(report.corrupt) >= limit:
            break
        if isinstance(record, CorruptRecord):
            report.corrupt.append(record)
            continue
        try:
            example = tf.train.Example.FromString(record)
        except DecodeError as err:
            report.corrupt.append(CorruptRecord(path, index, f"not a tf.train.Example: {err}"))
            continue
        problem = image_problem(example.features.feature) if decode_images else None
        if problem:
            report.corrupt.append(CorruptRecord(path, index, problem))
            continue
        report.add(example.features.feature, path, index)
        report.records_per_file[path] += 1
    return report
