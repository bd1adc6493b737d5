"""Hugging Face ``datasets``: an Arrow-backed ``Dataset`` or a streaming ``IterableDataset``.

Reading. A ``Dataset`` is a table of Arrow columns, memory-mapped from the cache; TensorFlow has
no Arrow reader, so Python must hand the columns over. It does so a chunk of rows at a time
(``chunk_size``, 256 by default): a ``tf.data.Dataset.from_generator`` per chunk takes the rows
with Arrow's own (vectorized) compute and yields the chunk's columns as flat arrays: the encoded
image bytes (or paths) and the per-object values with their row lengths. No Python runs per
example: the rows are split apart, the images decoded (``tf.io.decode_image``, after
``tf.io.read_file`` for images stored as paths), the boxes converted and checked in graph mode.
A reader holds one chunk at a time, however large the dataset; no column is loaded whole
(``tf.data.Dataset.from_tensor_slices`` over the columns would hold every image in memory, and
past 2 GB could not be built at all). The chunks are this source's files: sharded by row (every
``num_shards``-th row from ``shard_index``), their order shuffled by the iteration's seed and
interleaved like files when the pipeline shuffles, read in the dataset's order when it does not.
A streaming ``IterableDataset`` goes through one generator over its Arrow batches, in stream
order, sharded by row as well.

Either way the records come from this Python process, so the source cannot be read on tf.data
service workers (``serializable`` is False). ``datasets`` is an extra: ``pip install
object-input[hf]``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from object_input import box_formats, feature_dict, fields
from object_input.decoders.annotation_checks import (
    check_boxes,
    check_class_count,
    check_class_ids,
    check_per_box_count,
    default_per_box_fields,
    kept_after_clip,
)
from object_input.decoders.image_files import PLACEHOLDER_PNG, looks_like_image
from object_input.options import check_option
from object_input.reliability import errors
from object_input.sources import (
    _hf_arrow as hf_arrow,
)
from object_input.sources import (
    _hf_layout as hf_layout,
)
from object_input.sources import (
    _samples as samples,
)
from object_input.sources._base import ReadContext, Source
from object_input.sources._hf_layout import HEIGHT, OBJECT_KEYS, WIDTH


class HuggingFace(Source):
    """Examples from a Hugging Face ``datasets`` dataset: detection or classification.

    The common detection layout (``cppe-5``, ``detection-datasets/coco``) is found by itself: an
    ``Image`` column; an objects column (a dict of lists or a list of dicts) whose ``bbox`` holds
    a box per object in COCO ``[x, y, width, height]`` pixels and ``category`` a ``ClassLabel``,
    with ``area`` and ``iscrowd`` (``is_crowd``) when present; ``image_id``, ``width`` and
    ``height`` columns. A classification layout is an ``Image`` column and a ``label``
    (``ClassLabel`` or integer) column. ``fields=`` names the columns of any other layout; a
    layout that cannot be found raises an error that lists the dataset's features and the
    ``fields=`` mapping to pass.

    Examples are what the TFRecord decoder yields: the decoded image, boxes normalized
    ``[ymin, xmin, ymax, xmax]`` by the decoded image's size, classes 1-based (a ``ClassLabel``
    id + 1; its names are :attr:`label_map`), areas and crowd and difficult flags as given
    (defaults otherwise), ``SOURCE_ID`` the image id, ``FILENAME`` the image's path as stored;
    ``LABEL`` (and ``COARSE_LABEL``) as stored, 0-based. The classes are the key named so
    (``category``, ``label``, ...), else the objects' only ``ClassLabel``; objects without one
    are class 1 (with several, which one holds the classes is an error to settle with
    ``fields=``, None for class 1). Record ids are ``"<name>/<split>:<row>"``.

    Each record gets the TFRecord decoder's checks: the image present and a JPEG, PNG, GIF or
    BMP; four values per box, finite, ordered and inside the image (``boxes_out_of_range``);
    one class per box in ``[1, 2**31)``; one area and flag per box; the decoded size equal to
    the ``height`` and ``width`` columns. A failure is flagged naming the record, for the
    pipeline to raise or skip; an image that does not decode is named by the pipeline's catch.
    Missing values (Arrow nulls) read as nothing: no image (flagged), no objects, a NaN
    coordinate (flagged), a class id of -1 as stored, no flag, the box's area, a label of -1.

    Attributes:
      layout: ``{key: column path}``, what is read from where (the keys of ``fields``).
      label_map: ``{class name: id}`` of a ``ClassLabel`` class column (its ids +
        ``class_offset``), else None.
      label_names: the names of a ``ClassLabel`` label column, by the label as stored, else None.
      streaming: whether the dataset streams (an ``IterableDataset``): read in stream order.
      num_rows: the dataset's rows (None when it streams).

    Args:
      dataset: a ``datasets.Dataset``, ``IterableDataset``, ``DatasetDict`` or
        ``IterableDatasetDict`` (with ``split``), a folder written by ``save_to_disk``, or a
        name for ``datasets.load_dataset`` (found in the local cache when offline).
      split: the split to read from a dict of splits, a folder or a name.
      image_column: the image column (default: the only ``Image`` column, or the one named
        ``image`` or ``img``); short for ``fields={"image": ...}``.
      objects_column: the column holding the objects (default: the first column of dicts with
        a box key, ``bbox``, ``bboxes``, ``box`` or ``boxes``; else columns of per-object lists
        at the top level).
      fields: ``{key: column}`` for what is not found by name, a key inside a column written
        ``"column.key"``; a key mapped to None is not read. Keys: ``image`` (an ``Image``,
        bytes or path column), ``label``, ``coarse_label``, ``source_id``, ``height``,
        ``width`` (one per image); ``boxes`` (4 numbers), ``classes``, ``area``, ``is_crowd``,
        ``difficult`` (one per object).
      bounding_box_format: the boxes' format, by the names of :mod:`object_input.box_formats`
        (``"xywh"``, COCO pixels; ``"xyxy"``; ``"rel_yxyx"``; ``"yolo"``; ...). Pixel boxes are
        normalized by the decoded image's size.
      class_offset: added to the class column's ids (default: 1 for a ``ClassLabel``, which is
        0-based; 0 for an integer column, taken as 1-based ids).
      boxes_out_of_range: ``"error"`` (a check) or ``"clip"``: boxes are clipped to the image
        and those left without area dropped and counted in ``NUM_DROPPED_BOXES``. Either way
        coordinates within float noise of the image (1e-5 of its size) are clipped.
      channels: image channels to decode to (1, 3 or 4).
      chunk_size: rows handed from Arrow to TensorFlow at a time (see the module docstring).
      name: the record ids' name (default: the dataset's name, else ``"huggingface"``).
      load_options: keyword arguments for ``datasets.load_dataset`` when ``dataset`` is a name
        (``data_files``, ``revision``, ``streaming``, ``cache_dir``, ...).
    """

    # Records are rows of a table; their values are checked and decoded in graph mode, inside
    # the map whose op errors are caught: reading cannot fail.
    marks_read_errors = True
    serializable = False

    def __init__(
        self,
        dataset: Any,
        *,
        split: str | None = None,
        image_column: str | None = None,
        objects_column: str | None = None,
        fields: Mapping[str, str | None] | None = None,
        bounding_box_format: str = "xywh",
        class_offset: int | None = None,
        boxes_out_of_range: str = "error",
        channels: int = 3,
        chunk_size: int = 256,
        name: str | None = None,
        load_options: Mapping[str, Any] | None = None,
    ):
        datasets = hf_layout.import_datasets()
        check_option("boxes_out_of_range", boxes_out_of_range)
        if channels not in (1, 3, 4):
            raise ValueError(f"channels must be 1, 3 or 4, got {channels!r}")
        if not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
        self.box_format = box_formats.canonical_format(bounding_box_format)
        self.boxes_out_of_range = boxes_out_of_range
        self.channels = channels
        self.chunk_size = chunk_size
        dataset, loaded_as = _load(datasets, dataset, split, dict(load_options or {}))
        self.streaming = isinstance(dataset, datasets.IterableDataset)
        if dataset.features is None:
            raise ValueError(
                "HuggingFace needs a dataset whose features are known; this IterableDataset's "
                "are not: give them with dataset.cast(features)"
            )
        self.layout = hf_layout.infer_layout(dataset.features, image_column, objects_column, fields)
        self.label_map, self.label_names, self.class_offset = hf_layout.class_names(
            datasets, dataset.features, self.layout, class_offset
        )
        tops = list(dict.fromkeys(path.split(".")[0] for path in self.layout.values()))
        self.dataset = dataset.select_columns(tops).with_format("arrow")
        self.num_rows = None if self.streaming else len(dataset)
        self.name = name or loaded_as or _dataset_name(dataset)
        split_name = getattr(dataset, "split", None)
        self._prefix = f"{self.name}/{split_name}:" if split_name else f"{self.name}:"
        self._signature = hf_arrow.signature(self.layout)

    @property
    def label_map_origin(self) -> str | None:
        """:attr:`label_map` as messages name it."""
        if self.label_map is None:
            return None
        return f"label map of ClassLabel column {self.layout[fields.CLASSES]!r}"

    def records(self, context: ReadContext) -> tf.data.Dataset:
        chunks = self._stream(context) if self.streaming else self._chunks(context)
        return chunks.flat_map(lambda chunk: self._rows(chunk, context))

    def _chunks(self, context: ReadContext) -> tf.data.Dataset:
        """The shard's chunks of rows, each as flat column arrays, in their read order."""
        reading = context.reading
        rows = range(reading.shard_index, self.num_rows, reading.num_shards)
        count = -(-len(rows) // self.chunk_size)

        def chunk(index: np.int64) -> Iterator[dict[str, np.ndarray]]:
            taken = rows[int(index) * self.chunk_size : (int(index) + 1) * self.chunk_size]
            yield hf_arrow.arrays(self.dataset[taken], np.asarray(taken, np.int64), self.layout)

        def read(index: tf.Tensor) -> tf.data.Dataset:
            return tf.data.Dataset.from_generator(
                chunk, output_signature=self._signature, args=(index,)
            )

        indices = tf.data.Dataset.range(count)
        if not (context.shuffle and reading.file_shuffle and count > 1):
            return indices.flat_map(read)
        return context.shuffled(indices, count).interleave(
            read,
            cycle_length=max(1, min(reading.num_readers, count)),
            block_length=reading.block_length,
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=context.deterministic,
        )

    def _stream(self, context: ReadContext) -> tf.data.Dataset:
        """The shard's rows of a streaming dataset in chunks, in stream order."""
        import pyarrow as pa

        reading = context.reading

        def chunks() -> Iterator[dict[str, np.ndarray]]:
            start = 0
            for table in self.dataset.iter(batch_size=self.chunk_size):
                rows = np.arange(start, start + table.num_rows, dtype=np.int64)
                start += table.num_rows
                mine = rows % reading.num_shards == reading.shard_index
                if mine.any():
                    yield hf_arrow.arrays(table.filter(pa.array(mine)), rows[mine], self.layout)

        return tf.data.Dataset.from_generator(chunks, output_signature=self._signature)

    def _rows(self, chunk: dict[str, tf.Tensor], context: ReadContext) -> tf.data.Dataset:
        """A chunk's records: their ids (made for the whole chunk at once) and rows, the
        per-object values split by their row lengths."""
        ids = tf.strings.join([self._prefix, tf.strings.as_string(chunk["row"])])
        rows = {key: value for key, value in chunk.items() if "/" not in key and key != "row"}
        for key in self.layout:
            if key not in OBJECT_KEYS:
                continue
            values = chunk[f"{key}/values"]
            if key == fields.BOXES:
                values = tf.RaggedTensor.from_row_lengths(values, chunk["boxes/sizes"])
            rows[key] = tf.RaggedTensor.from_row_lengths(values, chunk[f"{key}/lengths"])
        marks = [tf.fill(tf.shape(ids), mark) for mark in context.unmarked()]
        return tf.data.Dataset.from_tensor_slices((ids, rows, *marks))

    def decode(
        self, record_id: tf.Tensor, payload: Any, *, defer_image: bool = False
    ) -> dict[str, tf.Tensor]:
        layout = self.layout
        source_id = payload.get(fields.SOURCE_ID, tf.constant(""))
        checks = errors.RecordChecks(record_id, source_id)
        image = self._image(payload, checks)
        size = tf.shape(image)[:2]
        if HEIGHT in layout and WIDTH in layout:
            given = tf.cast(tf.stack([payload[HEIGHT], payload[WIDTH]]), tf.int32)
            checks.add(
                tf.reduce_any(given < 0) | tf.reduce_all(tf.equal(given, size)),
                "image_size",
                "image has height, width",
                size,
                f"but columns {layout[HEIGHT]}, {layout[WIDTH]} give",
                given,
            )
        features = {
            fields.IMAGE: image,
            fields.IMAGE_SHAPE: size,
            fields.SOURCE_ID: source_id,
            fields.FILENAME: payload["image_path"],
            fields.KEY: tf.constant(""),
            fields.RECORD_ID: record_id,
        }
        for key in (fields.LABEL, fields.COARSE_LABEL):
            if key in layout:
                features[key] = tf.cast(payload[key], tf.int32)
        if fields.BOXES not in layout:
            return checks.flag(features)
        objects = self._objects(payload, size, checks)
        # No objects: a record's object count may be known when traced (a one-row chunk).
        stand_in = {
            key: tf.zeros([0, *value.shape[1:]], value.dtype) for key, value in objects.items()
        }
        return errors.guarded(
            checks,
            errors.FLAG,
            lambda chosen: self._checked_example(features, chosen),
            objects,
            stand_in,
        )

    def _image(self, payload: dict[str, tf.Tensor], checks: errors.RecordChecks) -> tf.Tensor:
        """The decoded image, its bytes read from the path when the row holds none; a 1x1
        stand-in (and a flag) for a row without an image or with bytes that are none."""
        data, path = payload["image_bytes"], payload["image_path"]
        has_data, has_path = tf.strings.length(data) > 0, tf.strings.length(path) > 0
        column = self.layout[fields.IMAGE]
        present = checks.add(
            has_data | has_path,
            "no_image",
            f"has no image: column {column} holds neither bytes nor a path",
        )
        encoded = tf.cond(
            has_data,
            lambda: data,
            lambda: tf.cond(has_path, lambda: tf.io.read_file(path), lambda: tf.constant("")),
        )
        is_image = checks.add(
            ~present | looks_like_image(encoded),
            "not_an_image",
            f"column {column}",
            lambda: tf.strings.join(["(", tf.where(has_path, path, "bytes"), ")"]),
            "is not a JPEG, PNG, GIF or BMP image",
        )
        encoded = tf.cond(present & is_image, lambda: encoded, lambda: tf.constant(PLACEHOLDER_PNG))
        return tf.io.decode_image(encoded, channels=self.channels, expand_animations=False)

    def _objects(
        self, payload: dict[str, tf.Tensor], size: tf.Tensor, checks: errors.RecordChecks
    ) -> dict[str, tf.Tensor]:
        """The per-object values, boxes normalized, each checked (unclipped, unselected)."""
        layout = self.layout
        coordinates = payload[fields.BOXES]
        num = tf.cast(coordinates.nrows(), tf.int32)
        counts = tf.cast(coordinates.row_lengths(), tf.int32)
        checks.add(
            tf.reduce_all(tf.equal(counts, 4)),
            "box_lists",
            f"column {layout[fields.BOXES]} has boxes of",
            lambda: tf.boolean_mask(counts, tf.not_equal(counts, 4)),
            "values, not 4",
        )
        raw = coordinates.to_tensor(shape=[None, 4])
        normalized = box_formats.convert(raw, self.box_format, "rel_yxyx", size)
        check_boxes(
            checks,
            normalized,
            f"{layout[fields.BOXES]} (as normalized ymin, xmin, ymax, xmax)",
            in_range=self.boxes_out_of_range == "error",
            range_hint=("(pass boxes_out_of_range='clip' to clip them)",),
        )
        out = {fields.BOXES: normalized}
        if fields.CLASSES in layout:
            ids = payload[fields.CLASSES]
            check_class_count(
                checks, tf.size(ids), num, f"column {layout[fields.CLASSES]} has", "values"
            )
            classes = ids + self.class_offset
            check_class_ids(
                checks, classes, f"classes ({layout[fields.CLASSES]} + {self.class_offset})"
            )
            out[fields.CLASSES] = tf.cast(classes, tf.int32)
        else:
            out[fields.CLASSES] = tf.ones([num], tf.int32)
        for key in (fields.AREA, fields.IS_CROWD, fields.DIFFICULT):
            if key in layout:
                check_per_box_count(checks, tf.size(payload[key]), num, f"column {layout[key]} has")
                out[key] = payload[key]
        return out

    def _checked_example(
        self, features: dict[str, tf.Tensor], objects: dict[str, tf.Tensor]
    ) -> dict[str, tf.Tensor]:
        """The example of a record whose objects passed their checks (or of their stand-ins)."""
        unclipped = objects[fields.BOXES]
        boxes = tf.clip_by_value(unclipped, 0.0, 1.0)
        size = features[fields.IMAGE_SHAPE]
        out = {
            **features,
            fields.BOXES: boxes,
            fields.CLASSES: objects[fields.CLASSES],
            # Of unknown length, as the decoder's, so that batches get the same side fields.
            fields.IMAGE_CLASSES: tf.raw_ops.PlaceholderWithDefault(
                input=tf.zeros([0], tf.int32), shape=[None]
            ),
            fields.NUM_DROPPED_BOXES: tf.constant(0, tf.int32),
            **default_per_box_fields(boxes, size[0], size[1]),
        }
        if fields.AREA in objects:
            given = objects[fields.AREA]
            out[fields.AREA] = tf.where(tf.math.is_nan(given), out[fields.AREA], given)
        for key in (fields.IS_CROWD, fields.DIFFICULT):
            if key in objects:
                out[key] = objects[key]
        if self.boxes_out_of_range == "clip":
            out = feature_dict.mask_boxes(out, kept_after_clip(boxes, unclipped))
        return out

    @classmethod
    def sample(cls, folder: str, damage: int | None = None) -> HuggingFace:
        datasets = hf_layout.import_datasets()
        images = samples.images(damage)
        side = samples.SIDE
        ymin, xmin, ymax, xmax = (side * c for c in samples.BOX)
        objects = {"bbox": [[xmin, ymin, xmax - xmin, ymax - ymin]], "category": [0]}
        features = datasets.Features(
            {
                "image": datasets.Image(),
                "objects": {
                    "bbox": datasets.List(datasets.List(datasets.Value("float32"), length=4)),
                    "category": datasets.List(datasets.ClassLabel(names=["cat"])),
                },
            }
        )
        table = datasets.Dataset.from_dict(
            {
                "image": [{"bytes": data, "path": None} for data in images],
                "objects": [objects] * samples.RECORDS,
            },
            features=features,
        )
        return cls(table, name="sample")

    def __repr__(self) -> str:
        rows = "streaming" if self.streaming else f"{self.num_rows} rows"
        return f"HuggingFace({self._prefix[:-1]!r}, {rows}, fields {self.layout})"


def _load(datasets: Any, dataset: Any, split: str | None, options: dict) -> tuple[Any, str | None]:
    """The one split to read, and the name it was loaded by (None for a dataset object)."""
    loaded_as = None
    if isinstance(dataset, (str, os.PathLike)):
        loaded_as = os.fspath(dataset)
        if os.path.isdir(loaded_as) and any(
            os.path.exists(os.path.join(loaded_as, marker))
            for marker in ("dataset_dict.json", "state.json")
        ):
            dataset = datasets.load_from_disk(loaded_as)
        else:
            dataset = datasets.load_dataset(loaded_as, split=split, **options)
    elif options:
        raise ValueError("load_options apply to a dataset given by name or folder")
    if isinstance(dataset, (datasets.DatasetDict, datasets.IterableDatasetDict)):
        if split not in dataset:
            raise ValueError(
                f"HuggingFace needs split= one of {sorted(dataset)} for a dict of splits, "
                f"got {split!r}"
            )
        return dataset[split], loaded_as
    if not isinstance(dataset, (datasets.Dataset, datasets.IterableDataset)):
        raise TypeError(
            "HuggingFace needs a datasets.Dataset, IterableDataset, DatasetDict or a name, got "
            f"{type(dataset).__name__}"
        )
    if split is not None and loaded_as is None and str(dataset.split) != split:
        raise ValueError(
            f"split={split!r} selects from a dict of splits; this dataset is split "
            f"{dataset.split!r} already"
        )
    return dataset, loaded_as


def _dataset_name(dataset: Any) -> str:
    info = dataset.info
    return info.dataset_name or info.builder_name or "huggingface"

