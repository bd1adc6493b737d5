"""A small synthetic detection dataset: coloured shapes with boxes and instance masks.

Used by ``object-input demo``, the benchmarks and the tests; nothing is downloaded.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import numpy as np
import tensorflow as tf

from object_input.writers import build_example, write_tfrecords

CLASS_NAMES = ("rectangle", "ellipse", "triangle")


def _shape_mask(kind: int, height: int, width: int, box: np.ndarray) -> np.ndarray:
    """Pixel mask of one shape inscribed in ``box`` (pixel corners y0, x0, y1, x1)."""
    y0, x0, y1, x1 = box
    yy, xx = np.mgrid[0:height, 0:width]
    inside = (yy >= y0) & (yy < y1) & (xx >= x0) & (xx < x1)
    if kind == 0:
        return inside
    cy, cx = (y0 + y1 - 1) / 2, (x0 + x1 - 1) / 2
    ry, rx = max((y1 - y0) / 2, 0.5), max((x1 - x0) / 2, 0.5)
    if kind == 1:
        return inside & (((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1.0)
    # Triangle with its apex at the top centre and its base on the box's bottom edge.
    rel = (yy - y0 + 0.5) / max(y1 - y0, 1)
    return inside & (np.abs(xx - cx) <= rel * rx)


def make_example(
    rng: np.random.Generator,
    height: int = 96,
    width: int = 128,
    max_objects: int = 4,
    min_objects: int = 0,
    image_format: str = "png",
    index: int = 0,
) -> dict:
    """One random image with shapes; returns the arrays ``build_example`` takes."""
    image = rng.integers(0, 60, size=(height, width, 3), dtype=np.uint8)
    count = int(rng.integers(min_objects, max_objects + 1))
    boxes, classes, masks = [], [], []
    for _ in range(count):
        h = int(rng.integers(max(4, height // 8), max(5, height // 2)))
        w = int(rng.integers(max(4, width // 8), max(5, width // 2)))
        y0 = int(rng.integers(0, height - h + 1))
        x0 = int(rng.integers(0, width - w + 1))
        kind = int(rng.integers(0, len(CLASS_NAMES)))
        mask = _shape_mask(kind, height, width, np.array([y0, x0, y0 + h, x0 + w]))
        image[mask] = rng.integers(80, 256, size=3, dtype=np.uint8)
        ys, xs = np.nonzero(mask)
        boxes.append(
            [ys.min() / height, xs.min() / width, (ys.max() + 1) / height, (xs.max() + 1) / width]
        )
        classes.append(kind + 1)
        masks.append(mask.astype(np.uint8))
    return {
        "image": image,
        "boxes": np.asarray(boxes, np.float32).reshape(-1, 4),
        "classes": classes,
        "class_texts": [CLASS_NAMES[c - 1] for c in classes],
        "masks": np.asarray(masks, np.uint8).reshape(-1, height, width),
        "image_format": image_format,
        "filename": f"synthetic_{index:06d}.{image_format}",
        "source_id": str(index),
    }


def synthetic_examples(
    num_examples: int,
    *,
    seed: int = 0,
    sizes: Sequence[tuple[int, int]] = ((96, 128), (120, 90), (64, 64)),
    max_objects: int = 4,
    min_objects: int = 0,
    image_format: str = "png",
) -> Iterator[tf.train.Example]:
    """``num_examples`` Examples with shapes, boxes, classes, texts and PNG masks."""
    rng = np.random.default_rng(seed)
    for index in range(num_examples):
        height, width = sizes[index % len(sizes)]
        arrays = make_example(rng, height, width, max_objects, min_objects, image_format, index)
        yield build_example(arrays.pop("image"), **arrays)


def write_synthetic_dataset(
    directory: str | os.PathLike,
    num_examples: int = 64,
    num_shards: int = 4,
    *,
    compression: str | None = None,
    seed: int = 0,
    name: str = "synthetic",
    **kwargs,
) -> list[str]:
    """Write a synthetic dataset as TFRecord shards ``directory/<name>-*``; returns the paths."""
    prefix = os.path.join(os.fspath(directory), name)
    examples = synthetic_examples(num_examples, seed=seed, **kwargs)
    return write_tfrecords(examples, prefix, num_shards, compression)
