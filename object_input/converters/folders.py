"""Class-per-folder image trees (``root/<class>/<image>``) to image-level classification
TFRecords: each record holds the image and its class in ``image/class/label`` and
``image/class/text`` (no boxes)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from object_input.converters.common import (
    IMAGE_EXTENSIONS,
    Conversion,
    ConversionError,
    ConversionResult,
    label_map_for,
    read_image,
)
from object_input.converters.write_options import WriteOptions, takes_write_options
from object_input.converters.writing import run
from object_input.label_map import LabelMapSource
from object_input.writers import build_example


def folder_images(root: str | os.PathLike) -> list[tuple[str, str]]:
    """``(class name, image path)`` of every image under ``root/<class>/`` (recursively), sorted.

    Hidden files and folders are ignored, as are files without an image extension.
    """
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise ConversionError(f"{root!r} is not a folder")
    found = []
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        if name.startswith(".") or not os.path.isdir(folder):
            continue
        for parent, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            found.extend(
                (name, os.path.join(parent, f))
                for f in sorted(files)
                if not f.startswith(".") and f.lower().endswith(IMAGE_EXTENSIONS)
            )
    if not found:
        raise ConversionError(
            f"no images under {root!r}: expected root/<class>/<image> with extensions "
            f"{', '.join(IMAGE_EXTENSIONS)}"
        )
    return found


@takes_write_options
def convert_folders(
    root: str | os.PathLike,
    output: str | os.PathLike,
    *,
    write: WriteOptions | Mapping[str, Any] | None = None,
) -> ConversionResult:
    """Convert ``root/<class>/<image>`` trees to sharded TFRecords with image-level classes.

    Args:
      root: the folder whose subfolders are the classes.
      output: path prefix of the shards: ``out/train`` → ``out/train-00000-of-00004.tfrecord``.
      write: how to write: shards, label map, order, compression, threads (see
        ``WriteOptions``); its fields may also be given as keywords (``num_shards=2``).

    Keep ``write.shuffle`` on, or every shard lists the classes one after the other.
    """
    return run(folders_conversion(root, label_map=write.label_map), output, write)


def folders_conversion(
    root: str | os.PathLike, *, label_map: LabelMapSource | None = None
) -> Conversion:
    """The images of a class-per-folder tree found, with how to build each one's record
    (:func:`convert_folders`'s arguments)."""
    root = os.fspath(root)
    found = folder_images(root)
    mapping = label_map_for((name for name, _ in found), label_map, root)

    def build(entry: tuple[str, str]) -> bytes:
        name, path = entry
        file = read_image(path)
        relative = os.path.relpath(path, root)
        return build_example(
            file.encoded,
            image_format=file.format,
            height=file.height,
            width=file.width,
            filename=relative,
            source_id=relative,
            image_classes=[mapping[name]],
            image_class_texts=[name],
        ).SerializeToString(deterministic=True)

    return Conversion(
        found,
        build,
        mapping,
        description=f"folders {os.path.basename(os.path.normpath(root))}",
        count_boxes=None,
    )
