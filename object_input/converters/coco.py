"""COCO JSON (instances or person keypoints) to detection TFRecords.

Per annotation: the box, the category (its COCO id, or the id of its name in a given label map),
``iscrowd``, ``area``, the instance mask (polygons, uncompressed or compressed RLE, decoded with
pycocotools and stored as one PNG per box) and keypoints with COCO visibilities. Images without
annotations are kept as negatives.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from object_input.converters.common import (
    Conversion,
    ConversionError,
    ConversionResult,
    check_size,
    pixel_boxes_to_normalized,
    read_image,
)
from object_input.converters.write_options import WriteOptions, takes_write_options
from object_input.converters.writing import run
from object_input.label_map import LabelMapSource, load_label_map
from object_input.writers import build_example


@dataclasses.dataclass
class _Image:
    id: Any
    file_name: str
    height: int
    width: int
    annotations: list[dict]


def require_pycocotools() -> Any:
    """``pycocotools.mask``, or an ImportError that says how to install it."""
    try:
        from pycocotools import mask
    except ImportError:
        raise ImportError(
            "converting COCO masks needs pycocotools: pip install object-input[convert]"
        ) from None
    return mask


def segmentation_mask(segmentation: Any, height: int, width: int, where: str) -> np.ndarray:
    """uint8 ``[H, W]`` mask of a COCO segmentation: polygons, RLE or compressed RLE."""
    mask_utils = require_pycocotools()
    try:
        if isinstance(segmentation, list):
            if not segmentation:
                return np.zeros((height, width), np.uint8)
            rle = mask_utils.merge(mask_utils.frPyObjects(segmentation, height, width))
        elif isinstance(segmentation, dict) and isinstance(segmentation.get("counts"), list):
            rle = mask_utils.frPyObjects(segmentation, height, width)
        elif isinstance(segmentation, dict) and "counts" in segmentation:
            rle = dict(segmentation)
            if isinstance(rle["counts"], str):
                rle["counts"] = rle["counts"].encode("ascii")
        else:
            raise ConversionError(f"{where}: segmentation is neither polygons nor RLE")
        mask = mask_utils.decode(rle)
    except (TypeError, ValueError, IndexError) as err:
        if isinstance(err, ConversionError):
            raise
        raise ConversionError(f"{where}: bad segmentation: {err}") from err
    if mask.shape != (height, width):
        raise ConversionError(
            f"{where}: segmentation is {mask.shape[1]}x{mask.shape[0]}, image is {width}x{height}"
        )
    return mask


@takes_write_options
def convert_coco(
    annotations: str | os.PathLike,
    images: str | os.PathLike,
    output: str | os.PathLike,
    *,
    masks: bool = True,
    keypoints: bool = True,
    include_crowd: bool = True,
    write: WriteOptions | Mapping[str, Any] | None = None,
) -> ConversionResult:
    """Convert a COCO annotation file and its image folder to sharded TFRecords and a label map.

    Args:
      annotations: the COCO JSON file (``instances_*.json`` or ``person_keypoints_*.json``).
      images: folder the images' ``file_name`` are relative to.
      output: path prefix of the shards: ``out/train`` → ``out/train-00000-of-00008.tfrecord``.
      masks: write instance masks (PNG per box) from the segmentations.
      keypoints: write keypoints and visibilities when the categories define keypoints.
      include_crowd: keep ``iscrowd`` annotations (flagged ``is_crowd``); False skips them.
      write: how to write: shards, label map, order, compression, threads (see
        ``WriteOptions``); its fields may also be given as keywords (``num_shards=2``).

    A ``write.label_map`` renumbers the categories by name; without one the COCO category ids
    are kept.

    Boxes outside the image are clipped to it; annotations whose clipped box is empty are
    skipped and listed in the result's ``skipped``.
    """
    conversion = coco_conversion(
        annotations,
        images,
        masks=masks,
        keypoints=keypoints,
        include_crowd=include_crowd,
        label_map=write.label_map,
    )
    return run(conversion, output, write)


def coco_conversion(
    annotations: str | os.PathLike,
    images: str | os.PathLike,
    *,
    masks: bool = True,
    keypoints: bool = True,
    include_crowd: bool = True,
    label_map: LabelMapSource | None = None,
) -> Conversion:
    """The annotations of a COCO file read and checked, with how to build each image's record
    (:func:`convert_coco`'s arguments)."""
    annotations = os.fspath(annotations)
    try:
        with open(annotations, encoding="utf-8") as file:
            data = json.load(file)
    except OSError as err:
        raise ConversionError(f"cannot read {annotations!r}: {err.strerror}") from err
    except json.JSONDecodeError as err:
        raise ConversionError(f"{annotations}: not valid JSON: {err}") from err
    for key in ("images", "categories"):
        if not isinstance(data.get(key), list):
            raise ConversionError(f"{annotations}: no {key!r} list; is this a COCO file?")
    categories = {}
    for index, category in enumerate(data["categories"]):
        _require(category, ("id", "name"), f"{annotations}: categories[{index}]")
        categories[category["id"]] = category
    if label_map is None:
        mapping = {c["name"]: int(c["id"]) for c in categories.values()}
    else:
        mapping = load_label_map(label_map)
        missing = sorted({c["name"] for c in categories.values()} - set(mapping))
        if missing:
            raise ConversionError(
                f"{annotations}: categories {missing} are not in the label map {label_map!r}"
            )
    num_keypoints = 0
    if keypoints:
        num_keypoints = max((len(c.get("keypoints") or ()) for c in categories.values()), default=0)

    by_id: dict[Any, _Image] = {}
    for index, image in enumerate(data["images"]):
        _require(image, ("id", "file_name", "height", "width"), f"{annotations}: images[{index}]")
        by_id[image["id"]] = _Image(
            image["id"], image["file_name"], int(image["height"]), int(image["width"]), []
        )
    skipped: list[str] = []
    for index, ann in enumerate(data.get("annotations") or ()):
        where = f"{annotations}: annotations[{index}]"
        _require(ann, ("image_id", "bbox", "category_id"), where)
        if ann["image_id"] not in by_id:
            raise ConversionError(f"{where}: image_id {ann['image_id']!r} is not in 'images'")
        if ann["category_id"] not in categories:
            raise ConversionError(
                f"{where}: category_id {ann['category_id']!r} is not in 'categories'"
            )
        if ann.get("iscrowd") and not include_crowd:
            continue
        image = by_id[ann["image_id"]]
        box = _clipped_box(ann["bbox"], image, where)
        if box is None:
            skipped.append(f"{where} (id {ann.get('id')}): empty box {ann['bbox']}")
            continue
        image.annotations.append(dict(ann, _box=box, _where=where))

    def build(image: _Image) -> bytes:
        return _coco_example(
            image, images, categories, mapping, masks, num_keypoints
        ).SerializeToString(deterministic=True)

    return Conversion(
        list(by_id.values()),
        build,
        mapping,
        description=f"COCO {os.path.basename(annotations)}",
        count_boxes=_count_boxes,
        skipped=skipped,
    )


def _count_boxes(image: _Image) -> int:
    return len(image.annotations)


def _require(entry: Any, keys: tuple[str, ...], where: str) -> None:
    if not isinstance(entry, dict):
        raise ConversionError(f"{where}: expected an object, got {type(entry).__name__}")
    missing = [key for key in keys if key not in entry]
    if missing:
        raise ConversionError(f"{where}: missing {', '.join(missing)}")


def _clipped_box(bbox: Any, image: _Image, where: str) -> list[float] | None:
    """Pixel ``[xmin, ymin, xmax, ymax]`` of a COCO ``[x, y, w, h]`` box clipped to the image, or
    None if that is empty."""
    try:
        x, y, w, h = (float(v) for v in bbox)
    except (TypeError, ValueError):
        raise ConversionError(
            f"{where}: bbox must be [x, y, width, height], got {bbox!r}"
        ) from None
    ymin, xmin = max(y, 0.0), max(x, 0.0)
    ymax, xmax = min(y + h, image.height), min(x + w, image.width)
    if ymax <= ymin or xmax <= xmin:
        return None
    return [xmin, ymin, xmax, ymax]


def _box_area(box: list[float], image: _Image) -> float:
    xmin, ymin, xmax, ymax = box
    return (ymax - ymin) * (xmax - xmin)


def _coco_example(
    image: _Image,
    images_dir: str | os.PathLike,
    categories: dict,
    mapping: dict[str, int],
    masks: bool,
    num_keypoints: int,
):
    path = os.path.join(os.fspath(images_dir), image.file_name)
    file = read_image(path)
    check_size(file, image.height, image.width, f"image id {image.id!r}", path)
    anns = image.annotations
    options: dict[str, Any] = {}
    if masks:
        options["masks"] = np.zeros((len(anns), image.height, image.width), np.uint8)
        for i, ann in enumerate(anns):
            options["masks"][i] = segmentation_mask(
                ann.get("segmentation", []), image.height, image.width, ann["_where"]
            )
    if num_keypoints:
        points = np.zeros((len(anns), num_keypoints, 3), np.float64)
        for i, ann in enumerate(anns):
            values = ann.get("keypoints") or []
            if len(values) % 3 or len(values) > 3 * num_keypoints:
                raise ConversionError(
                    f"{ann['_where']}: keypoints has {len(values)} values, expected up to "
                    f"3 x {num_keypoints} (x, y, visibility)"
                )
            points[i, : len(values) // 3] = np.reshape(values, (-1, 3))
        scale = np.array([image.height, image.width])
        options["keypoints"] = points[..., [1, 0]] / scale
        options["keypoint_visibilities"] = points[..., 2].astype(np.int64)
    names = [categories[a["category_id"]]["name"] for a in anns]
    return build_example(
        file.encoded,
        image_format=file.format,
        height=file.height,
        width=file.width,
        filename=image.file_name,
        source_id=str(image.id),
        boxes=pixel_boxes_to_normalized([a["_box"] for a in anns], image.height, image.width),
        classes=[mapping[name] for name in names],
        class_texts=names,
        area=[float(a["area"]) if "area" in a else _box_area(a["_box"], image) for a in anns],
        is_crowd=[int(bool(a.get("iscrowd", 0))) for a in anns],
        **options,
    )
