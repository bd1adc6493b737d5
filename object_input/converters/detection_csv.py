"""Detection CSV (one row per box) to detection TFRecords.

The header names the columns ``filename,width,height,class,xmin,ymin,xmax,ymax`` (in any order,
other columns ignored); coordinates are pixels. An image's rows may be anywhere in the file: they
are grouped by ``filename``, in order of first appearance. A row with an empty ``class`` and empty
coordinates stands for an image without boxes.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from object_input.converters.common import (
    Conversion,
    ConversionError,
    ConversionResult,
    check_size,
    fit_box,
    label_map_for,
    pixel_boxes_to_normalized,
    read_image,
)
from object_input.converters.write_options import WriteOptions, takes_write_options
from object_input.converters.writing import run
from object_input.label_map import LabelMapSource
from object_input.writers import build_example

COLUMNS = ("filename", "width", "height", "class", "xmin", "ymin", "xmax", "ymax")
# Field separators a header is tried with when it lacks columns, to name the one it uses.
_SEPARATORS = (",", ";", "\t", "|")
_COORDINATES = ("xmin", "ymin", "xmax", "ymax")


@dataclasses.dataclass
class CsvImage:
    """The rows of one image."""

    filename: str
    width: int
    height: int
    where: str  # file:line of its first row
    lines: list[int] = dataclasses.field(default_factory=list)  # of every row, boxless too
    classes: list[str] = dataclasses.field(default_factory=list)
    boxes: list[tuple[float, float, float, float]] = dataclasses.field(default_factory=list)
    skipped: list[str] = dataclasses.field(default_factory=list)  # boxes clipped away


def read_detection_csv(
    path: str | os.PathLike,
    clip_boxes: bool = False,
    *,
    columns: Mapping[str, str] | None = None,
    images: dict[str, CsvImage] | None = None,
    field_delim: str = ",",
) -> list[CsvImage]:
    """Rows of a detection CSV grouped by image; errors name the file, line and column.

    A box reaching outside its image is an error, or with ``clip_boxes`` clipped to it (and
    listed in the image's ``skipped`` when nothing is left). ``columns`` maps names of
    :data:`COLUMNS` to the CSV's own header names. Pass the ``images`` of earlier files to group
    rows across files. ``field_delim`` is the one-character field separator. Read through
    ``tf.io.gfile`` (``gs://`` and other filesystems work).
    """
    if not isinstance(field_delim, str) or len(field_delim) != 1 or field_delim in '"\n\r':
        raise ValueError(f"field_delim must be one character (not a quote), got {field_delim!r}")
    path = os.fspath(path)
    names = {name: (columns or {}).get(name, name) for name in COLUMNS}
    images = {} if images is None else images
    try:
        with tf.io.gfile.GFile(path, "r") as file:
            reader = csv.reader(file, delimiter=field_delim)
            header = [name.strip().lstrip("\ufeff") for name in next(reader, [])]
            missing = [c for c in names.values() if c not in header]
            if missing:
                raise ConversionError(
                    f"{path}: the header lacks columns {missing}; expected "
                    f"{field_delim.join(names.values())} (in any order)"
                    + _separator_hint(field_delim.join(header), field_delim, names.values())
                )
            index = {name: header.index(column) for name, column in names.items()}
            for values in reader:
                if not any(v.strip() for v in values):
                    continue
                where = f"{path}:{reader.line_num}"
                if len(values) != len(header):
                    raise ConversionError(
                        f"{where}: {len(values)} fields, the header has {len(header)}"
                    )
                row = {name: values[i] for name, i in index.items()}
                _add_row(images, row, where, clip_boxes, names, reader.line_num)
    except (OSError, tf.errors.OpError) as err:
        reason = getattr(err, "strerror", None) or getattr(err, "message", str(err))
        raise ConversionError(f"cannot read {path!r}: {reason}") from err
    except (UnicodeDecodeError, csv.Error) as err:
        raise ConversionError(f"{path}: not a UTF-8 CSV file: {err}") from None
    if not images:
        raise ConversionError(f"{path}: no rows")
    return list(images.values())


def _add_row(
    images: dict[str, CsvImage],
    row: dict,
    where: str,
    clip: bool,
    names: Mapping[str, str],
    line: int,
) -> None:
    filename = row["filename"].strip()
    if not filename:
        raise ConversionError(f"{where}: column {names['filename']} is empty")
    width, height = (_parse(row, c, where, int, names) for c in ("width", "height"))
    if not (0 < width < 2**31 and 0 < height < 2**31):
        raise ConversionError(f"{where}: image size {width}x{height} is not in [1, 2**31)")
    image = images.setdefault(filename, CsvImage(filename, width, height, where))
    if (image.width, image.height) != (width, height):
        raise ConversionError(
            f"{where}: {filename!r} is {width}x{height} here but {image.width}x{image.height} "
            f"at {image.where}"
        )
    image.lines.append(line)
    name = row["class"].strip()
    if not name and not any(row[c].strip() for c in _COORDINATES):
        return  # an image without boxes
    if not name:
        raise ConversionError(f"{where}: column {names['class']} is empty")
    box = tuple(_parse(row, c, where, float, names) for c in _COORDINATES)
    xmin, ymin, xmax, ymax = box
    if xmax < xmin or ymax < ymin:
        raise ConversionError(f"{where}: box has xmax < xmin or ymax < ymin: {box}")
    fitted = fit_box(box, width, height, clip, where)
    if fitted is None:
        image.skipped.append(f"{where}: box {box} lies outside the image")
        return
    image.classes.append(name)
    image.boxes.append(fitted)


def _separator_hint(line: str, field_delim: str, wanted: Iterable[str]) -> str:
    """``"; the header looks ';'-separated: ..."`` when another separator splits the header
    ``line`` into more of the ``wanted`` column names than ``field_delim`` does; else ``""``."""
    wanted = set(wanted)

    def found(separator: str) -> int:
        return len(wanted.intersection(name.strip() for name in line.split(separator)))

    best = max(_SEPARATORS, key=found)
    if best == field_delim or found(best) <= found(field_delim):
        return ""
    return (
        f"; the header looks {best!r}-separated: pass field_delim={best!r} "
        f"(convert csv: --field-delim {best!r})"
    )


def _parse(row: dict, column: str, where: str, kind: type, names: Mapping[str, str]):
    text = row[column].strip()
    try:
        value = kind(text)
    except ValueError:
        value = None
    # float() reads "nan" and "inf", which no box holds (NaN would pass every comparison).
    if value is None or not math.isfinite(value):
        wanted = "an integer" if kind is int else "a number" if value is None else "finite"
        raise ConversionError(f"{where}: column {names[column]} is {text!r}, not {wanted}")
    return value


@takes_write_options
def convert_csv(
    csv_path: str | os.PathLike,
    images: str | os.PathLike,
    output: str | os.PathLike,
    *,
    clip_boxes: bool = False,
    field_delim: str = ",",
    write: WriteOptions | Mapping[str, Any] | None = None,
) -> ConversionResult:
    """Convert a detection CSV and its image folder to sharded TFRecords and a label map.

    Args:
      csv_path: the CSV, with a ``filename,width,height,class,xmin,ymin,xmax,ymax`` header.
      images: folder the ``filename`` column is relative to.
      output: path prefix of the shards: ``out/train`` → ``out/train-00000-of-00004.tfrecord``.
      clip_boxes: clip boxes that reach outside their image (else that is an error); boxes
        left empty are skipped and listed in the result's ``skipped``.
      field_delim: the one-character field separator (``";"``, ``"\\t"``).
      write: how to write: shards, label map, order, compression, threads (see
        ``WriteOptions``); its fields may also be given as keywords (``num_shards=2``).
    """
    conversion = csv_conversion(
        csv_path, images, clip_boxes=clip_boxes, field_delim=field_delim, label_map=write.label_map
    )
    return run(conversion, output, write)


def csv_conversion(
    csv_path: str | os.PathLike,
    images: str | os.PathLike,
    *,
    clip_boxes: bool = False,
    field_delim: str = ",",
    label_map: LabelMapSource | None = None,
) -> Conversion:
    """The rows of a detection CSV read and checked, with how to build each image's record
    (:func:`convert_csv`'s arguments)."""
    rows = read_detection_csv(csv_path, clip_boxes, field_delim=field_delim)
    mapping = label_map_for((n for image in rows for n in image.classes), label_map, str(csv_path))
    images_dir = os.fspath(images)

    def build(image: CsvImage) -> bytes:
        path = os.path.join(images_dir, image.filename)
        file = read_image(path)
        check_size(file, image.height, image.width, image.where, path)
        return build_example(
            file.encoded,
            image_format=file.format,
            height=image.height,
            width=image.width,
            filename=image.filename,
            source_id=image.filename,
            boxes=pixel_boxes_to_normalized(np.array(image.boxes), image.height, image.width),
            classes=[mapping[name] for name in image.classes],
            class_texts=image.classes,
        ).SerializeToString(deterministic=True)

    return Conversion(
        rows,
        build,
        mapping,
        description=f"CSV {os.path.basename(os.fspath(csv_path))}",
        count_boxes=_count_boxes,
        skipped=[message for image in rows for message in image.skipped],
    )


def _count_boxes(image: CsvImage) -> int:
    return len(image.boxes)
