"""Detection annotation CSVs (one row per box) with the images in a folder."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from object_input import fields
from object_input.converters.common import label_map_for
from object_input.converters.detection_csv import COLUMNS, CsvImage, read_detection_csv
from object_input.decoders.annotation_checks import default_per_box_fields
from object_input.decoders.image_files import PLACEHOLDER_PNG, looks_like_image
from object_input.reliability import errors
from object_input.sources import _samples as samples
from object_input.sources._base import ReadContext, Source
from object_input.sources._files import PathSource, list_files
from object_input.tracing.maps import map_on_cpu

# Rows listed in a record id before "...".
_LINES_SHOWN = 4


class DetectionCSV(Source):
    """Boxes from annotation CSVs with one row per box, images from ``image_dir``.

    The columns are ``filename,width,height,class,xmin,ymin,xmax,ymax`` (any order, others
    ignored; ``columns`` maps these names to the CSV's own) with the box in pixels. A row with
    an empty class and empty coordinates lists an image without boxes. Rows are grouped by image
    wherever they are in the files. The CSVs are read and checked once, in Python, when the
    source is built (annotation files are small: a row per box; the reader is the ``convert
    csv`` converter's); the images are read and decoded in the pipeline. Examples are what the
    TFRecord decoder yields: normalized boxes, 1-based class ids (from ``label_map``, else in
    order of first appearance; see :attr:`label_map`), ``SOURCE_ID`` and ``FILENAME`` the
    image's file name, default weights, areas and flags, an empty ``KEY``. Only images with rows
    are read. Record ids are ``"csv path:line N"`` (the image's rows, ``lines 2,7,9``).

    Errors name the CSV file and line: a missing column, a value that is not a number, a box
    outside its image (unless ``clip_boxes``) or with min > max, sizes that differ between rows
    of one image, an image not in ``image_dir``; class names missing from ``label_map`` are
    listed. An image whose decoded size differs from its rows' fails in the pipeline, naming it.

    Args:
      csv_files: annotation CSV path, glob, directory, or list of those; each with a header.
      image_dir: the folder the ``filename`` column is relative to.
      columns: ``{default name: CSV header name}`` for columns named differently.
      label_map: text label map path or ``{name: id}``.
      clip_boxes: clip boxes reaching outside their image (boxes left empty are dropped) instead
        of raising.
      channels: image channels to decode to (1, 3 or 4).
      field_delim: the one-character field separator of the CSVs (``";"``, ``"\\t"``).
    """

    # The CSV is read when the source is made; records are indices into it, and the images are
    # read while decoding, inside the map whose op errors are caught: reading cannot fail.
    marks_read_errors = True

    def __init__(
        self,
        csv_files: PathSource,
        image_dir: str | os.PathLike,
        *,
        columns: Mapping[str, str] | None = None,
        label_map: str | os.PathLike | Mapping[str, int] | None = None,
        clip_boxes: bool = False,
        channels: int = 3,
        field_delim: str = ",",
    ):
        unknown = sorted(set(columns or {}) - set(COLUMNS))
        if unknown:
            raise ValueError(f"columns renames unknown columns {unknown}; they are {list(COLUMNS)}")
        if channels not in (1, 3, 4):
            raise ValueError(f"channels must be 1, 3 or 4, got {channels!r}")
        self.files = list_files(csv_files, (".csv",))
        self.image_dir = os.fspath(image_dir)
        self.channels = channels
        grouped: dict[str, CsvImage] = {}
        for path in self.files:
            read_detection_csv(
                path, clip_boxes, columns=columns, images=grouped, field_delim=field_delim
            )
        images = list(grouped.values())
        names = dict.fromkeys(name for image in images for name in image.classes)
        #: ``{class name: id}``: the label map given, else ids in order of first appearance.
        self.label_map = (
            {name: i for i, name in enumerate(names, start=1)}
            if label_map is None
            else label_map_for(names, label_map, ", ".join(self.files))
        )
        if label_map is None:
            self.label_map_origin = (
                f"label map of the classes of {', '.join(self.files)} in order of first appearance"
            )
        elif not isinstance(label_map, Mapping):
            self.label_map_origin = f"label map {os.fspath(label_map)}"
        self._check_images_exist(images)
        self._arrays = _arrays(images, self.image_dir, self.label_map)
        self.num_images = len(images)
        #: boxes dropped by ``clip_boxes`` because nothing of them was inside the image.
        self.skipped = [message for image in images for message in image.skipped]

    def _check_images_exist(self, images: list[CsvImage]) -> None:
        # One listing per folder, not one existence check per image (cheap on gs:// too).
        listings: dict[str, set[str]] = {}
        for image in images:
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
            indices = context.shuffled(indices, self.num_images)
        record_ids = self._arrays["record_ids"]
        return map_on_cpu(indices, lambda i: (tf.gather(record_ids, i), i, *context.unmarked()))

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
        is_image = checks.add(
            looks_like_image(encoded),
            "not_an_image",
            "file",
            path,
            "is not a JPEG, PNG, GIF or BMP image",
        )
        # What is not an image decodes as a placeholder; the flag carries the error, for the
        # pipeline to raise or skip.
        encoded = tf.where(is_image, encoded, PLACEHOLDER_PNG)
        image = tf.io.decode_image(encoded, channels=self.channels, expand_animations=False)
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
        return checks.flag(out)

    @classmethod
    def sample(cls, folder: str, damage: int | None = None) -> DetectionCSV:
        images = samples.images(damage)
        side = samples.SIDE
        ymin, xmin, ymax, xmax = (side * c for c in samples.BOX)
        rows = [",".join(COLUMNS)]
        for index, data in enumerate(images):
            with open(os.path.join(folder, f"{index}.png"), "wb") as f:
                f.write(data)
            rows.append(f"{index}.png,{side},{side},cat,{xmin},{ymin},{xmax},{ymax}")
        path = os.path.join(folder, "boxes.csv")
        with open(path, "w") as f:
            f.write("\n".join(rows) + "\n")
        return cls(path, folder)

    def __repr__(self) -> str:
        return (
            f"DetectionCSV({self.num_images} images from {len(self.files)} CSV files, "
            f"image_dir={self.image_dir!r})"
        )


def _record_id(image: CsvImage) -> str:
    path = image.where.rsplit(":", 1)[0]
    shown = ",".join(str(n) for n in image.lines[:_LINES_SHOWN])
    more = ",..." if len(image.lines) > _LINES_SHOWN else ""
    return f"{path}:{'line' if len(image.lines) == 1 else 'lines'} {shown}{more}"


def _arrays(
    images: list[CsvImage], image_dir: str, label_map: Mapping[str, int]
) -> dict[str, np.ndarray]:
    counts = [len(image.boxes) for image in images]
    pixels = np.array([b for image in images for b in image.boxes], np.float64).reshape(-1, 4)
    sizes = np.array([[image.height, image.width] for image in images], np.int32)
    # Pixel (xmin, ymin, xmax, ymax) to normalized (ymin, xmin, ymax, xmax), per box's image.
    scale = np.repeat(sizes, counts, axis=0)[:, [0, 1, 0, 1]]
    boxes = pixels[:, [1, 0, 3, 2]] / np.maximum(scale, 1)
    return {
        "record_ids": np.array([_record_id(image) for image in images], object),
        "paths": np.array([os.path.join(image_dir, image.filename) for image in images], object),
        "filenames": np.array([image.filename for image in images], object),
        "sizes": sizes,
        "row_splits": np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        "boxes": boxes.astype(np.float32),
        "classes": np.array(
            [label_map[name] for image in images for name in image.classes], np.int32
        ),
    }
