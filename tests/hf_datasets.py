"""Hugging Face datasets for tests, built from dicts: seven rows of the COCO-like detection layout
(an ``Image``, ``image_id``, ``width``, ``height`` and an ``objects`` column), with values whose
normalized boxes are exact. Importing this module skips the importing test without ``datasets``.
"""

import numpy as np
import pytest

from object_input.writers import encode_image

datasets = pytest.importorskip("datasets", reason="pip install '.[hf]' brings datasets")

NAMES = ["cat", "dog", "bird"]
# (height, width) powers of two, boxes of whole pixels: the normalized values are exact.
SIZES = [(8, 16), (4, 4), (16, 8), (8, 8), (4, 16), (16, 16), (8, 4)]
# Per row: COCO [x, y, width, height] pixel boxes, categories (0-based), crowd flags, areas.
OBJECTS = [
    ([[2, 1, 4, 3], [0, 0, 16, 8]], [1, 0], [False, True], [12, 128]),
    ([], [], [], []),
    ([[1, 2, 2, 4]], [2], [False], [8]),
    ([[0, 0, 8, 8], [4, 4, 4, 4], [1, 1, 1, 1]], [0, 1, 2], [False, False, True], [64, 16, 1]),
    ([[8, 0, 8, 4]], [1], [False], [32]),
    ([], [], [], []),
    ([[0, 4, 4, 4]], [2], [True], [16]),
]
ROWS = len(SIZES)
SEQUENCE_FEATURES = datasets.Features(
    {
        "image": datasets.Image(),
        "image_id": datasets.Value("int64"),
        "width": datasets.Value("int32"),
        "height": datasets.Value("int32"),
        "objects": datasets.Sequence(
            {
                "bbox": datasets.Sequence(datasets.Value("float32"), length=4),
                "category": datasets.ClassLabel(names=NAMES),
                "iscrowd": datasets.Value("bool"),
                "area": datasets.Value("int64"),
            }
        ),
    }
)


def image(row):
    """The RGB pixels of ``row``."""
    height, width = SIZES[row]
    return np.random.default_rng(row).integers(0, 256, [height, width, 3], dtype=np.uint8)


def png(row):
    """``row``'s image as PNG bytes."""
    return encode_image(image(row), "png")


def expected_boxes(row):
    """The normalized [ymin, xmin, ymax, xmax] of a row's COCO boxes, by hand."""
    height, width = SIZES[row]
    boxes = [
        [y / height, x / width, (y + h) / height, (x + w) / width] for x, y, w, h in OBJECTS[row][0]
    ]
    return np.array(boxes, np.float32).reshape(-1, 4)


def detection_rows(rows=range(ROWS), images=None, objects=None):
    """The columns of the COCO-like layout: objects as a dict of lists."""
    images = images or {}
    objects = objects or {}
    columns = {"image": [], "image_id": [], "width": [], "height": [], "objects": []}
    for row in rows:
        boxes, categories, crowd, area = objects.get(row, OBJECTS[row])
        columns["image"].append({"bytes": images.get(row, png(row)), "path": None})
        columns["image_id"].append(100 + row)
        columns["height"].append(SIZES[row][0])
        columns["width"].append(SIZES[row][1])
        columns["objects"].append(
            {"bbox": boxes, "category": categories, "iscrowd": crowd, "area": area}
        )
    return columns


def detection_dataset(split="train", features=SEQUENCE_FEATURES, **rows):
    """A dataset of :func:`detection_rows`."""
    return datasets.Dataset.from_dict(detection_rows(**rows), features=features, split=split)
