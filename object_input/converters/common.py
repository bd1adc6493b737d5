"""What every converter shares: image files, label maps, box normalization, and the plan, the
checks and the result of the writing (:mod:`object_input.converters.writing` writes)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from object_input import wording
from object_input.box_formats import convert
from object_input.converters import write_options
from object_input.converters.write_options import WriteOptions
from object_input.decoders.image_files import (
    ImageError,
    decode_image_file,
    image_format,
    op_message,
)
from object_input.label_map import LabelMapSource, format_label_map, load_label_map, path_beside
from object_input.writers import StagedShards, describe_replaced

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")


class ConversionError(ValueError):
    """An annotation or image cannot be converted; the message names the file and field."""


class BadImage(ConversionError):
    """An image that fails its check: it does not decode, is truncated, or its size disagrees
    with its annotation. Left out of the conversion, or under ``on_error="raise"`` raised."""


@dataclasses.dataclass(frozen=True)
class ImageFile:
    """An image file's bytes, ready for ``image/encoded``: JPEG or PNG (others become PNG)."""

    encoded: bytes
    format: str
    height: int
    width: int


@dataclasses.dataclass
class ConversionResult:
    """What a conversion wrote."""

    paths: list[str]
    label_map_path: str
    label_map: dict[str, int]
    num_examples: int
    num_boxes: int
    skipped: list[str] = dataclasses.field(default_factory=list)
    #: the images left out (``"file: reason"``), sorted.
    left_out: list[str] = dataclasses.field(default_factory=list)
    #: the shards of an earlier dataset under the same prefix (another shard count or
    #: compression) that were removed once these were written.
    replaced: list[str] = dataclasses.field(default_factory=list)
    #: the records hold image-level classes and no boxes (class folders).
    image_classes: bool = False

    @property
    def pattern(self) -> str:
        """A glob matching the shards (the one path when there is one shard)."""
        if len(self.paths) == 1:
            return self.paths[0]
        stem, _, rest = self.paths[0].rpartition("-00000-of-")
        return f"{stem}-*{rest[5:]}"

    def summary(self) -> str:
        """One line for people: counts and where the shards and label map are."""
        labels = (
            "image-level classes" if self.image_classes else wording.count(self.num_boxes, "box")
        )
        text = (
            f"wrote {wording.count(self.num_examples, 'example')} with {labels} to "
            f"{wording.count(len(self.paths), 'shard')} {self.pattern}; label map "
            f"{self.label_map_path} ({wording.count(len(self.label_map), 'class')})"
        )
        if self.skipped:
            skipped = wording.count(len(self.skipped), "annotation")
            text += f"; skipped {skipped} (first: {self.skipped[0]})"
        if self.left_out:
            text += (
                f"; left out {failed_check(len(self.left_out), 'that')} (first: {self.left_out[0]})"
            )
        if self.replaced:
            prefix = self.paths[0].rpartition("-00000-of-")[0]
            text += f"; {describe_replaced(prefix, self.replaced)}"
        return text


def failed_check(number: int, relative: str = "") -> str:
    """``"1 image failed its check"``, ``"3 images that failed their check"``: ``number`` images
    and the clause about them (after ``relative``, a pronoun or nothing), in agreement."""
    their = "its" if number == 1 else "their"
    return (
        f"{wording.count(number, 'image')} {relative}{' ' if relative else ''}failed {their} check"
    )


def read_image(path: str | os.PathLike) -> ImageFile:
    """Read an image file and decode it in full (:func:`decode_image_file`); JPEG and PNG bytes
    are kept as they are, BMP and GIF become PNG.

    A file that cannot be read is a ConversionError; one that does not decode, or is truncated,
    a :class:`BadImage` naming it and why.
    """
    path = os.fspath(path)
    try:
        data = _read_bytes(path)
    except OSError as err:
        raise ConversionError(f"cannot read image {path!r}: {err.strerror}") from err
    except tf.errors.OpError as err:
        raise ConversionError(f"cannot read image {path!r}: {op_message(err)}") from err
    kind = image_format(data)
    kept = kind in ("jpeg", "png")
    try:
        pixels = decode_image_file(data, channels=0 if kept else 3)
    except ImageError as err:
        raise BadImage(f"{path}: {err}") from None
    height, width = pixels.shape[:2]
    if kept:
        return ImageFile(data, kind, height, width)
    return ImageFile(tf.io.encode_png(pixels).numpy(), "png", height, width)


def _read_bytes(path: str) -> bytes:
    """A file's bytes: local paths through Python, others (``gs://``, where Beam's workers read
    them) through ``tf.io.gfile``."""
    if "://" not in path:
        with open(path, "rb") as file:
            return file.read()
    with tf.io.gfile.GFile(path, "rb") as file:
        return file.read()


def check_size(image: ImageFile, height: int, width: int, where: str, path: str) -> None:
    """A :class:`BadImage` when an annotation's image size disagrees with the image's own."""
    if (height, width) != (image.height, image.width):
        raise BadImage(
            f"{where}: image size {width}x{height} (width x height) in the annotation, but "
            f"{path!r} is {image.width}x{image.height}"
        )


def pixel_boxes_to_normalized(boxes: Any, height: int, width: int) -> np.ndarray:
    """``[N, 4]`` pixel ``(xmin, ymin, xmax, ymax)`` to normalized ``[ymin, xmin, ymax, xmax]``."""
    pixels = np.asarray(boxes, np.float64).reshape(-1, 4)
    return convert(pixels, "xyxy", "rel_yxyx", (height, width)).numpy().astype(np.float32)


def fit_box(
    box: tuple[float, float, float, float], width: int, height: int, clip: bool, where: str
) -> tuple[float, float, float, float] | None:
    """A pixel ``(xmin, ymin, xmax, ymax)`` box checked against the image.

    A box reaching outside the image is an error naming ``where``, or with ``clip`` is clipped to
    it; None when the clipped box is empty (the caller skips and lists it).
    """
    xmin, ymin, xmax, ymax = box
    if min(xmin, ymin) >= 0 and xmax <= width and ymax <= height:
        return box
    if not clip:
        raise ConversionError(
            f"{where}: box {box} (xmin, ymin, xmax, ymax) reaches outside the {width}x{height} "
            "image; clip_boxes=True (--clip-boxes) clips such boxes to the image"
        )
    clipped = (max(xmin, 0), max(ymin, 0), min(xmax, width), min(ymax, height))
    if clipped[2] <= clipped[0] or clipped[3] <= clipped[1]:
        return None
    return clipped


def label_map_for(
    names: Iterable[str], label_map: LabelMapSource | None, where: str
) -> dict[str, int]:
    """``{name: id}``: ``label_map`` (which must name every class), or sorted names → 1..N."""
    names = set(names)
    if label_map is None:
        return {name: i for i, name in enumerate(sorted(names), start=1)}
    mapping = load_label_map(label_map)
    missing = sorted(names - set(mapping))
    if missing:
        raise ConversionError(f"{where}: classes {missing} are not in the label map {label_map!r}")
    return mapping


def check_label_map(path: str, label_map: Mapping[str, int], source: LabelMapSource | None) -> bool:
    """Whether ``label_map`` is to be written to ``path``: False when that file holds it
    already; a ConversionError when it holds a different one that was not given as ``source``
    (the label map the user gave; None when the classes were collected): a different label map
    is never silently replaced (its ids would change)."""
    if not tf.io.gfile.exists(path):
        return True
    if isinstance(source, (str, os.PathLike)) and _same_file(os.fspath(source), path):
        return False
    with tf.io.gfile.GFile(path, "r") as file:
        if load_label_map(path) == dict(label_map) or file.read() == format_label_map(label_map):
            return False
    if source is None:
        raise ConversionError(
            f"{path} exists with other classes or ids; pass it as the label map to keep its "
            "ids (e.g. convert the validation split with the training split's label map), "
            "or choose another label map output"
        )
    return True


def save_label_map(path: str, label_map: Mapping[str, int], source: LabelMapSource | None) -> None:
    """Write the label map unless ``path`` holds it already (see :func:`check_label_map`)."""
    if not check_label_map(path, label_map, source):
        return
    text = format_label_map(label_map)
    parent = os.path.dirname(path)
    if parent:
        tf.io.gfile.makedirs(parent)
    with tf.io.gfile.GFile(path, "w") as file:
        file.write(text)


def _same_file(first: str, second: str) -> bool:
    if "://" in first or "://" in second:
        return first == second
    return os.path.exists(first) and os.path.samefile(first, second)


def auto_shards(num_images: int) -> int:
    """Shards for ``num_images`` images by default: one per 1,000 images, from 1 to 256."""
    return min(256, max(1, -(-num_images // 1000)))


def order(items: list, shuffle: bool, seed: int) -> list:
    """``items`` in a seeded random order (the same for the same seed), or as they are."""
    if not shuffle:
        return items
    permutation = np.random.default_rng(seed).permutation(len(items))
    return [items[i] for i in permutation]


@dataclasses.dataclass(frozen=True)
class Conversion:
    """What a converter found before anything is written: the items (one per image), how to
    build each one's serialized record, the label map, and what it skipped while reading the
    annotations. Written by :func:`run` on local threads, or by
    :mod:`object_input.converters.beam` on Apache Beam.

    ``build`` raises :class:`BadImage` for an image that fails its check; it and the items must
    pickle (Beam sends them to its workers). ``count_boxes`` is None for records of image-level
    classes, without boxes.
    """

    items: list
    build: Callable[[Any], bytes]
    label_map: dict[str, int]
    description: str
    count_boxes: Callable[[Any], int] | None
    skipped: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Plan:
    """Where and in what order a conversion writes: its items in ``write``'s order, the shard
    count and the label map file."""

    items: list
    num_shards: int
    label_map_path: str


def prepare(conversion: Conversion, output: str | os.PathLike, write: WriteOptions) -> Plan:
    """Order the items, choose the shard count and check that the label map may be written
    (a different one there is an error, before any record is built): what happens before the
    records, wherever they are built."""
    items = order(conversion.items, write.shuffle, write.seed)
    num_shards = write.num_shards or auto_shards(len(items))
    label_map_path = os.fspath(write.label_map_output or path_beside(output))
    check_label_map(label_map_path, conversion.label_map, write.label_map)
    return Plan(items, num_shards, label_map_path)


def finish(
    conversion: Conversion,
    plan: Plan,
    write: WriteOptions,
    num_examples: int,
    left_out: Mapping[int, str],
) -> None:
    """What happens once every record is written, before the shards get their names: a
    conversion that wrote no record is an error, else the label map is written. Whatever
    raises here leaves no shard and no label map."""
    if not num_examples:
        if not left_out:
            raise ConversionError(f"{conversion.description}: no images to convert")
        reasons = sorted(left_out.values())
        more = f"; and {len(reasons) - 3} more" if len(reasons) > 3 else ""
        raise ConversionError(
            f"every image failed its check ({len(reasons)} of {len(reasons)}), so nothing was "
            f"written: {'; '.join(reasons[:3])}{more}"
        )
    save_label_map(plan.label_map_path, conversion.label_map, write.label_map)


def build_or_reason(build: Callable[[Any], bytes], item: Any, on_error: str) -> bytes | str:
    """``build(item)``; for an image that fails its check the reason (``"file: why"``), or
    under ``on_error == "raise"`` the :class:`BadImage`."""
    try:
        return build(item)
    except BadImage as err:
        if on_error == write_options.RAISE:
            raise
        return str(err)


def result(
    conversion: Conversion,
    plan: Plan,
    shards: StagedShards,
    num_examples: int,
    left_out: Mapping[int, str],
) -> ConversionResult:
    """The result of writing ``plan``'s items but those ``left_out`` (``{index: reason}``) to
    ``shards`` (published)."""
    count_boxes = conversion.count_boxes
    return ConversionResult(
        paths=shards.paths,
        label_map_path=plan.label_map_path,
        label_map=dict(conversion.label_map),
        num_examples=num_examples,
        num_boxes=0
        if count_boxes is None
        else sum(count_boxes(item) for i, item in enumerate(plan.items) if i not in left_out),
        skipped=list(conversion.skipped),
        left_out=sorted(left_out.values()),
        replaced=list(shards.replaced),
        image_classes=count_boxes is None,
    )
