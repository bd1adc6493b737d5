"""Class-per-folder image trees (``root/<class>/<image>``) to image-level classification
TFRecords: each record holds the image and its class in ``image/class/label`` and
``image/class/text`` (no boxes)."""

from __future__ import annotations

import os

from object_input.converters.common import (
    IMAGE_EXTENSIONS,
    ConversionError,
    ConversionResult,
    label_map_for,
    order,
    read_image,
    run,
)
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


def convert_folders(
    root: str | os.PathLike,
    output: str | os.PathLike,
    *,
    num_shards: int | None = None,
    label_map: LabelMapSource | None = None,
    label_map_output: str | os.PathLike | None = None,
    shuffle: bool = True,
    seed: int = 0,
    compression: str | None = None,
    num_workers: int | None = None,
    progress: bool = True,
) -> ConversionResult:
    """Convert ``root/<class>/<image>`` trees to sharded TFRecords with image-level classes.

    Args:
      root: the folder whose subfolders are the classes.
      output: path prefix of the shards: ``out/train`` → ``out/train-00000-of-00004.tfrecord``.
      num_shards: number of TFRecord files (default: one per 1,000 images, at most 256).
      label_map: ``{name: id}`` or a label map file; by default the folder names, sorted, get
        ids 1..N.
      label_map_output: where to write the label map (default ``label_map.pbtxt`` beside the
        shards).
      shuffle, seed: write the images in a seeded random order; keep it on, or every shard lists
        the classes one after the other.
      compression: None or ``"GZIP"``.
      num_workers: threads building records (default: the CPUs available).
      progress: show a progress bar on stderr.
    """
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

    return run(
        order(found, shuffle, seed),
        build,
        output,
        mapping,
        label_map_source=label_map,
        label_map_output=label_map_output,
        num_shards=num_shards,
        compression=compression,
        num_workers=num_workers,
        progress=progress,
        description=f"folders {os.path.basename(os.path.normpath(root))}",
        count_boxes=lambda entry: 0,
    )
