"""Detection annotation CSVs (one row per box) with the images in a folder."""

from __future__ import annotations

import csv
import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from object_input import errors, fields
from object_input.decoders.tf_example import default_per_box_fields, looks_like_image
from object_input.sources.base import ReadContext, Source
from object_input.sources.files import PathSource, list_files

#: the columns a row needs, as named in the CSV unless ``columns`` renames them.
COLUMNS = ("filename", "width", "height", "class", "xmin", "ymin", "xmax", "ymax")
# Rows listed in a record id before "...".
_LINES_SHOWN = 4


@dataclasses.dataclass
class _Image:
    filename: str
    height: int
    width: int
    where: str  # "file.csv:line N" of its first row
    lines: list[int] = dataclasses.field(default_factory=list)
    boxes: list[list[float]] = dataclasses.field(default_factory=list)
    classes: list[int] = dataclasses.field(default_factory=list)

    @property
    def record_id(self) -> str:
        path = self.where.rsplit(":line ", 1)[0]
        shown = ",".join(str(n) for n in self.lines[:_LINES_SHOWN])
        more = ",..." if len(self.lines) > _LINES_SHOWN else ""
        word = "line" if len(self.lines) == 1 else "lines"
        return f"{path}:{word} {shown}{more}"


class DetectionCSV(Source):
    """Boxes from annotation CSVs with one row per box, images from ``image_dir``.

    The default columns are ``filename,width,height,class,xmin,ymin,xmax,ymax`` with the box in
    pixels (``columns`` maps these names to the CSV's own). Rows are grouped by image wherever
    they are in the files. The CSVs are read and checked once, in Python, when the source is
    built (annotation files are small: a row per box); the images are read and decoded in the
    pipeline. Examples are what the TFRecord decoder yields: normalized boxes, 1-based class ids
    (from ``label_map``, else in order of first appearance; see :attr:`label_map`), ``SOURCE_ID``
    and ``FILENAME`` the image's file name, default weights, areas and flags, an empty ``KEY``.
    Only images with rows are read.

    Errors name the CSV file and line: a missing column, a value that is not a number, a box
    outside its image or with min > max, sizes that differ between rows of one image, a class
    missing from ``label_map``, an image not in ``image_dir``. An image whose decoded size
    differs from its rows' width and height fails in the pipeline, naming it.

    Args:
      csv_files: annotation CSV path, glob, directory, or list of those; each with a header.
      image_dir: the folder the ``filename`` column is relative to.
      columns: ``{default name: CSV header name}`` for columns named differently.
      label_map: text label map path or ``{name: id}``.
      channels: image channels to decode to (1, 3 or 4).
    """

    def __init__(
        self,
        csv_files: PathSource,
        image_dir: str | os.PathLike,
        *,
        columns: Mapping[str, str] | None = None,
        label_map: str | os.PathLike | Mapping[str, int] | None = None,
        channels: int = 3,
    ):
        unknown = sorted(set(columns or {}) - set(COLUMNS))
        if unknown:
            raise ValueError(f"columns renames unknown columns {unknown}; they are {list(COLUMNS)}")
        if channels not in (1, 3, 4):
            raise ValueError(f"channels must be 1, 3 or 4, got {channels!r}")
        self.files = list_files(csv_files, (".csv",))
        self.image_dir = os.fspath(image_dir)
        self.columns = {name: (columns or {}).get(name, name) for name in COLUMNS}
        self.channels = channels
        self.label_map: dict[str, int] = {}
        if label_map is not None:
            from object_input.label_map import load_label_map

            self.label_map = load_label_map(label_map)
        self._fixed_labels = label_map is not None
        images: dict[str, _Image] = {}
        for path in self.files:
            self._read(path, images)
        if not images:
            raise ValueError(f"no annotation rows in {self.files}")
        self._check_images_exist(images)
        self._arrays = _arrays(list(images.values()), self.image_dir)
        self.num_images = len(images)

    def _read(self, path: str, images: dict[str, _Image]) -> None:
        with tf.io.gfile.GFile(path, "r") as f:
            reader = csv.reader(f)
            header = [name.strip().lstrip("\ufeff") for name in next(reader, [])]
            missing = [c for c in self.columns.values() if c not in header]
            if missing:
                raise ValueError(
                    f"{path}: no column {missing[0]!r} in the header {header}; pass columns= to "
                    f"name the CSV's columns for {list(COLUMNS)}"
                )
            index = {name: header.index(column) for name, column in self.columns.items()}
            for row in reader:
                if not row or all(not v.strip() for v in row):
                    continue
                where = f"{path}:line {reader.line_num}"
                if len(row) != len(header):
                    raise ValueError(f"{where}: {len(row)} fields, the header has {len(header)}")
                self._add_row(
                    where, reader.line_num, {k: row[i].strip() for k, i in index.items()}, images
                )

    def _add_row(
        self, where: str, line: int, row: dict[str, str], images: dict[str, _Image]
    ) -> None:
        filename = row["filename"]
        if not filename:
            raise ValueError(f"{where}: empty {self.columns['filename']!r}")
        numbers = {}
        for name in ("width", "height", "xmin", "ymin", "xmax", "ymax"):
            try:
                numbers[name] = float(row[name])
            except ValueError:
                raise ValueError(
                    f"{where}: column {self.columns[name]!r} = {row[name]!r} is not a number"
                ) from None
        width, height = numbers["width"], numbers["height"]
        if width != int(width) or height != int(height) or width < 1 or height < 1:
            raise ValueError(
                f"{where}: width, height must be positive integers, got {width}, {height}"
            )
        xmin, ymin, xmax, ymax = (numbers[k] for k in ("xmin", "ymin", "xmax", "ymax"))
        if not (0 <= xmin <= xmax <= width and 0 <= ymin <= ymax <= height):
            raise ValueError(
                f"{where}: box xmin, ymin, xmax, ymax = {xmin:g}, {ymin:g}, {xmax:g}, {ymax:g} is "
                f"not ordered inside the {width:g} x {height:g} image"
            )
        image = images.get(filename)
        if image is None:
            image = images[filename] = _Image(filename, int(height), int(width), where)
        elif (image.height, image.width) != (height, width):
            raise ValueError(
                f"{where}: {filename} is {width:g} x {height:g} here but {image.width} x "
                f"{image.height} at {image.where}"
            )
        image.lines.append(line)
        image.boxes.append([ymin / height, xmin / width, ymax / height, xmax / width])
        image.classes.append(self._class_id(where, row["class"]))

    def _class_id(self, where: str, name: str) -> int:
        if name not in self.label_map:
            if self._fixed_labels:
                known = sorted(self.label_map)[:10]
                raise ValueError(f"{where}: class {name!r} is not in the label map ({known}...)")
            self.label_map[name] = len(self.label_map) + 1
        return self.label_map[name]

    def _check_images_exist(self, images: dict[str, _Image]) -> None:
        # One listing per folder, not one existence check per image (cheap on gs:// too).
        listings: dict[str, set[str]] = {}
        for image in images.values():
            folder, name = os.path.split(os.path.join(self.image_dir, image.filename))
            if folder not in listings:
                try:
                    listings[folder] = {e.rstrip("/") for e in tf.io.gfile.listdir(folder)}
                except tf.errors.NotFoundError:
                    listings[folder] = set()
            if name not in listings[folder]:
                raise ValueError(
                    f"{image.where}: image {image.filename!r} is not in image_dir "
                    f"{self.image_dir!r}"
                )

    def records(self, context: ReadContext) -> tf.data.Dataset:
        reading = context.reading
        indices = tf.data.Dataset.range(self.num_images).shard(
            reading.num_shards, reading.shard_index
        )
        if context.shuffle and reading.file_shuffle:
            indices = indices.shuffle(
                self.num_images, seed=context.seed, reshuffle_each_iteration=True
            )
        record_ids = self._arrays["record_ids"]
        return indices.map(lambda i: (tf.gather(record_ids, i), i))

    def decode(
        self, record_id: tf.Tensor, payload: Any, *, defer_image: bool = False
    ) -> dict[str, tf.Tensor]:
        arrays = self._arrays
        index = payload
        path = tf.gather(arrays["paths"], index)
        filename = tf.gather(arrays["filenames"], index)
        size = tf.gather(arrays["sizes"], index)
        row_splits = tf.constant(arrays["row_splits"])
        start, end = row_splits[index], row_splits[index + 1]
        boxes = tf.constant(arrays["boxes"])[start:end]
        encoded = tf.io.read_file(path)
        checks = errors.RecordChecks(record_id, filename)
        checks.add(
            looks_like_image(encoded),
            "not_an_image",
            "file",
            path,
            "is not a JPEG, PNG, GIF or BMP image",
        )
        with tf.control_dependencies(checks.asserts()):
            encoded = tf.identity(encoded)
        image = tf.io.decode_image(encoded, channels=self.channels, expand_animations=False)
        checks = errors.RecordChecks(record_id, filename)
        checks.add(
            tf.reduce_all(tf.equal(tf.shape(image)[:2], size)),
            "image_size",
            "image",
            path,
            "has height, width",
            tf.shape(image)[:2],
            "but the CSV gives",
            size,
        )
        with tf.control_dependencies(checks.asserts()):
            image = tf.identity(image)
        out = {
            fields.IMAGE: image,
            fields.IMAGE_SHAPE: tf.shape(image)[:2],
            fields.SOURCE_ID: filename,
            fields.FILENAME: filename,
            fields.KEY: tf.constant(""),
            fields.RECORD_ID: record_id,
            fields.BOXES: boxes,
            fields.CLASSES: tf.constant(arrays["classes"])[start:end],
            # Of unknown length, as the decoder's, so that batches get the same side fields.
            fields.IMAGE_CLASSES: tf.raw_ops.PlaceholderWithDefault(
                input=tf.zeros([0], tf.int32), shape=[None]
            ),
            fields.NUM_DROPPED_BOXES: tf.constant(0, tf.int32),
        }
        out.update(default_per_box_fields(boxes, size[0], size[1]))
        return out

    def __repr__(self) -> str:
        return (
            f"DetectionCSV({self.num_images} images from {len(self.files)} CSV files, "
            f"image_dir={self.image_dir!r})"
        )


def _arrays(images: list[_Image], image_dir: str) -> dict[str, np.ndarray]:
    counts = [len(image.boxes) for image in images]
    return {
        "record_ids": np.array([image.record_id for image in images], object),
        "paths": np.array([os.path.join(image_dir, image.filename) for image in images], object),
        "filenames": np.array([image.filename for image in images], object),
        "sizes": np.array([[image.height, image.width] for image in images], np.int32),
        "row_splits": np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        "boxes": np.array([b for image in images for b in image.boxes], np.float32).reshape(-1, 4),
        "classes": np.array([c for image in images for c in image.classes], np.int32),
    }
