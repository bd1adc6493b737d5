"""Pascal VOC XML annotations to detection TFRecords.

Each XML file describes one image: its ``filename`` and ``size``, and objects with a ``name``,
a ``bndbox`` in pixels and the ``difficult``, ``truncated`` and ``pose`` tags. Boxes are
normalized as the Object Detection API's VOC converter does (``xmin / width`` …). ``truncated``
and ``pose`` are written as ``image/object/truncated`` and ``image/object/view``.
"""

from __future__ import annotations

import dataclasses
import os
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from typing import Any

import numpy as np

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


@dataclasses.dataclass(frozen=True)
class VocObject:
    """One ``<object>`` of a VOC annotation."""

    name: str
    box: tuple[float, float, float, float]  # pixel xmin, ymin, xmax, ymax
    difficult: bool
    truncated: bool
    pose: str


@dataclasses.dataclass(frozen=True)
class VocAnnotation:
    """One VOC XML file."""

    path: str
    filename: str
    height: int
    width: int
    objects: tuple[VocObject, ...]


def parse_voc_xml(path: str | os.PathLike) -> VocAnnotation:
    """Parse one VOC annotation file; errors name the file and the missing or bad tag."""
    path = os.fspath(path)
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError as err:
        raise ConversionError(f"{path}: not valid XML: {err}") from err
    except OSError as err:
        raise ConversionError(f"cannot read {path!r}: {err.strerror}") from err
    objects = []
    for index, node in enumerate(root.findall("object")):
        where = f"{path}: object {index}"
        box_node = node.find("bndbox")
        if box_node is None:
            raise ConversionError(f"{where}: no <bndbox>")
        box = tuple(
            _number(box_node, tag, where, float) for tag in ("xmin", "ymin", "xmax", "ymax")
        )
        if box[2] < box[0] or box[3] < box[1]:
            raise ConversionError(f"{where}: bndbox has xmax < xmin or ymax < ymin: {box}")
        objects.append(
            VocObject(
                name=_text(node, "name", where),
                box=box,
                difficult=bool(_number(node, "difficult", where, int, 0)),
                truncated=bool(_number(node, "truncated", where, int, 0)),
                pose=_text(node, "pose", where, "Unspecified"),
            )
        )
    size = root.find("size")
    if size is None:
        raise ConversionError(f"{path}: no <size>")
    return VocAnnotation(
        path=path,
        filename=_text(root, "filename", path),
        height=_number(size, "height", f"{path}: size", int),
        width=_number(size, "width", f"{path}: size", int),
        objects=tuple(objects),
    )


def _fit(
    annotation: VocAnnotation, height: int, width: int, clip: bool
) -> tuple[VocAnnotation, list[str]]:
    """``annotation`` with its boxes checked against the image (see ``fit_box``), and the
    objects left out because clipping emptied their box."""
    kept, skipped = [], []
    for index, obj in enumerate(annotation.objects):
        where = f"{annotation.path}: object {index}"
        box = fit_box(obj.box, width, height, clip, where)
        if box is None:
            skipped.append(f"{where}: box {obj.box} lies outside the image")
        else:
            kept.append(dataclasses.replace(obj, box=box))
    return dataclasses.replace(annotation, objects=tuple(kept)), skipped


def _text(node: ElementTree.Element, tag: str, where: str, default: str | None = None) -> str:
    child = node.find(tag)
    if child is None or not (child.text or "").strip():
        if default is not None:
            return default
        raise ConversionError(f"{where}: no <{tag}>")
    return child.text.strip()


def _number(node: ElementTree.Element, tag: str, where: str, kind: type, default=None):
    text = _text(node, tag, where, None if default is None else str(default))
    try:
        return kind(float(text)) if kind is int else kind(text)
    except ValueError:
        raise ConversionError(f"{where}: <{tag}> is {text!r}, not a number") from None


def voc_files(
    annotations: str | os.PathLike, image_set: str | os.PathLike | None = None
) -> list[str]:
    """The XML files of a VOC folder (or its ``Annotations`` subfolder), or those an image set
    list names (``ImageSets/Main/train.txt``: one id per line), in order."""
    directory = os.fspath(annotations)
    if os.path.isdir(os.path.join(directory, "Annotations")):
        directory = os.path.join(directory, "Annotations")
    if not os.path.isdir(directory):
        raise ConversionError(f"{directory!r} is not a folder of VOC XML files")
    if image_set is None:
        names = sorted(n for n in os.listdir(directory) if n.lower().endswith(".xml"))
        if not names:
            raise ConversionError(f"no .xml files in {directory!r}{_devkit_hint(directory)}")
        return [os.path.join(directory, n) for n in names]
    with open(image_set, encoding="utf-8") as file:
        ids = [line.split()[0] for line in file if line.strip()]
    paths = [os.path.join(directory, f"{id_}.xml") for id_ in ids]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise ConversionError(
            f"{os.fspath(image_set)} names {len(missing)} ids without XML, first {missing[0]!r}"
        )
    return paths


def _devkit_hint(directory: str) -> str:
    """For a VOCdevkit folder (VOC roots inside, one per year): which roots to point at."""
    roots = sorted(
        name
        for name in os.listdir(directory)
        if os.path.isdir(os.path.join(directory, name, "Annotations"))
    )
    if not roots:
        return ""
    named = ", ".join(repr(os.path.join(directory, name)) for name in roots)
    which = "its VOC root" if len(roots) == 1 else "one of its VOC roots:"
    return f"; it is a VOCdevkit folder: pass {which} {named}"


def _images_folder(annotations: str, images: str | os.PathLike | None) -> str:
    if images is not None:
        return os.fspath(images)
    for candidate in (
        os.path.join(annotations, "JPEGImages"),
        os.path.join(os.path.dirname(os.path.normpath(annotations)), "JPEGImages"),
    ):
        if os.path.isdir(candidate):
            return candidate
    return annotations


@takes_write_options
def convert_voc(
    annotations: str | os.PathLike,
    output: str | os.PathLike,
    *,
    images: str | os.PathLike | None = None,
    image_set: str | os.PathLike | None = None,
    include_difficult: bool = True,
    clip_boxes: bool = False,
    write: WriteOptions | Mapping[str, Any] | None = None,
) -> ConversionResult:
    """Convert a folder of Pascal VOC XML files and their images to sharded TFRecords.

    Args:
      annotations: the folder of XML files, or a VOC root holding ``Annotations/``.
      output: path prefix of the shards: ``out/train`` → ``out/train-00000-of-00004.tfrecord``.
      images: folder of the images (default: ``JPEGImages`` inside or beside ``annotations``,
        else ``annotations`` itself).
      image_set: a list of image ids to convert (``ImageSets/Main/trainval.txt``).
      include_difficult: keep ``difficult`` objects (flagged); False leaves them out.
      clip_boxes: clip boxes that reach outside their image (else that is an error); objects
        left without a box are skipped and listed in the result's ``skipped``.
      write: how to write: shards, label map, order, compression, threads (see
        ``WriteOptions``); its fields may also be given as keywords (``num_shards=2``).
    """
    conversion = voc_conversion(
        annotations,
        images=images,
        image_set=image_set,
        include_difficult=include_difficult,
        clip_boxes=clip_boxes,
        label_map=write.label_map,
    )
    return run(conversion, output, write)


def voc_conversion(
    annotations: str | os.PathLike,
    *,
    images: str | os.PathLike | None = None,
    image_set: str | os.PathLike | None = None,
    include_difficult: bool = True,
    clip_boxes: bool = False,
    label_map: LabelMapSource | None = None,
) -> Conversion:
    """The VOC XML files read and checked, with how to build each image's record
    (:func:`convert_voc`'s arguments)."""
    files = voc_files(annotations, image_set)
    images_dir = _images_folder(os.fspath(annotations), images)
    parsed, skipped = [], []
    for path in files:
        annotation = parse_voc_xml(path)
        if annotation.height and annotation.width:  # else checked against the image file
            annotation, left_out = _fit(annotation, annotation.height, annotation.width, clip_boxes)
            skipped += left_out
        parsed.append(annotation)
    if not include_difficult:
        parsed = [
            dataclasses.replace(a, objects=tuple(o for o in a.objects if not o.difficult))
            for a in parsed
        ]
    mapping = label_map_for(
        (o.name for a in parsed for o in a.objects), label_map, os.fspath(annotations)
    )

    def build(annotation: VocAnnotation) -> bytes:
        example = _voc_example(annotation, images_dir, mapping, clip_boxes)
        return example.SerializeToString(deterministic=True)

    return Conversion(
        parsed, build, mapping, description="VOC", count_boxes=_count_boxes, skipped=skipped
    )


def _count_boxes(annotation: VocAnnotation) -> int:
    return len(annotation.objects)


def _voc_example(annotation: VocAnnotation, images_dir: str, mapping: dict[str, int], clip: bool):
    path = os.path.join(images_dir, annotation.filename)
    file = read_image(path)
    height, width = annotation.height, annotation.width
    if height == 0 and width == 0:  # some tools write an empty <size>; trust the image
        height, width = file.height, file.width
        annotation, _ = _fit(annotation, height, width, clip)
    check_size(file, height, width, annotation.path, path)
    objects = annotation.objects
    return build_example(
        file.encoded,
        image_format=file.format,
        height=height,
        width=width,
        filename=annotation.filename,
        source_id=os.path.splitext(os.path.basename(annotation.path))[0],
        boxes=pixel_boxes_to_normalized(np.array([o.box for o in objects]), height, width),
        classes=[mapping[o.name] for o in objects],
        class_texts=[o.name for o in objects],
        difficult=[int(o.difficult) for o in objects],
        truncated=[int(o.truncated) for o in objects],
        views=[o.pose for o in objects],
    )
