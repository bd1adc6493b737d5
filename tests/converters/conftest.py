"""The converters' datasets: a small COCO file, a VOC folder, and that folder with broken images."""

import json

import numpy as np
import pytest
import tensorflow as tf
from converter_files import (
    VOC,
    random_image,
    save_image,
    voc_xml,
)


def _polygon_box(polygon):
    xs, ys = polygon[0::2], polygon[1::2]
    return [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]


@pytest.fixture
def coco(tmp_path, rng):
    mask_utils = pytest.importorskip("pycocotools.mask")
    images_dir = tmp_path / "images"
    sizes = {1: (20, 30), 2: (16, 24), 3: (12, 12)}
    files = {1: "a.png", 2: "sub/b.jpg", 3: "c.png"}
    for image_id, (h, w) in sizes.items():
        save_image(images_dir / files[image_id], random_image(rng, h, w))
    polygon = [3.0, 2.0, 20.5, 4.0, 12.0, 15.5, 4.0, 12.0]
    raw_rle = mask_utils.encode(np.asfortranarray((rng.random((20, 30)) > 0.7).astype(np.uint8)))
    uncompressed = {"size": [20, 30], "counts": [5, 40, 10, 60, 485]}
    compressed = {"size": [20, 30], "counts": raw_rle["counts"].decode()}
    annotations = [
        {
            "id": 10,
            "image_id": 1,
            "category_id": 1,
            "bbox": _polygon_box(polygon),
            "area": 123.5,
            "iscrowd": 0,
            "segmentation": [polygon],
            "keypoints": [5, 6, 2, 0, 0, 0, 7.5, 8.5, 1],
        },
        {
            "id": 11,
            "image_id": 1,
            "category_id": 3,
            "bbox": [0, 0, 30, 20],
            "area": 300.0,
            "iscrowd": 1,
            "segmentation": uncompressed,
        },
        {
            "id": 12,
            "image_id": 1,
            "category_id": 3,
            "bbox": [10, 5, 8, 6],
            "area": 40.0,
            "iscrowd": 0,
            "segmentation": compressed,
        },
        # Overshoots the 24x16 image: clipped to it.
        {
            "id": 13,
            "image_id": 2,
            "category_id": 3,
            "bbox": [20, 10, 8, 9],
            "area": 72.0,
            "iscrowd": 0,
            "segmentation": [[20, 10, 24, 10, 24, 16, 20, 16]],
        },
        # Zero width: skipped and reported.
        {
            "id": 14,
            "image_id": 2,
            "category_id": 1,
            "bbox": [4, 4, 0, 3],
            "area": 0.0,
            "iscrowd": 0,
            "segmentation": [],
        },
    ]
    data = {
        "images": [
            {"id": i, "file_name": files[i], "height": h, "width": w} for i, (h, w) in sizes.items()
        ],
        "categories": [
            {"id": 1, "name": "person", "keypoints": ["nose", "eye", "ear"]},
            {"id": 3, "name": "car"},
        ],
        "annotations": annotations,
    }
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(data))
    return path, images_dir, data


@pytest.fixture
def voc(tmp_path, rng):
    root = tmp_path / "VOC2012"
    for stem, (filename, width, height, objects) in VOC.items():
        save_image(root / "JPEGImages" / filename, random_image(rng, height, width))
        (root / "Annotations").mkdir(parents=True, exist_ok=True)
        (root / "Annotations" / f"{stem}.xml").write_text(voc_xml(filename, width, height, objects))
    return root


TRUNCATED_AT = 8192


@pytest.fixture
def broken_voc(voc, rng):
    """The VOC folder with three more images, each broken: a JPEG cut at 8 KB (no end marker),
    a file that is not an image, and a PNG 41 pixels wide whose ``<size>`` says 40."""
    jpeg = tf.io.encode_jpeg(random_image(rng, 120, 160), quality=95).numpy()
    assert len(jpeg) > 2 * TRUNCATED_AT
    (voc / "JPEGImages" / "000004.jpg").write_bytes(jpeg[:TRUNCATED_AT])
    (voc / "JPEGImages" / "000005.jpg").write_text("<html>404 Not Found</html>")
    save_image(voc / "JPEGImages" / "000006.png", random_image(rng, 30, 41))
    for stem, filename, width, height in (
        ("000004", "000004.jpg", 160, 120),
        ("000005", "000005.jpg", 8, 8),
        ("000006", "000006.png", 40, 30),
    ):
        box = [("dog", (1, 1, 5, 5), 0, 0, "Left")]
        (voc / "Annotations" / f"{stem}.xml").write_text(voc_xml(filename, width, height, box))
    images, annotations = voc / "JPEGImages", voc / "Annotations"
    return voc, [
        f"{annotations / '000006.xml'}: image size 40x30 (width x height) in the annotation, "
        f"but '{images / '000006.png'}' is 41x30",
        f"{images / '000004.jpg'}: truncated JPEG: the data ends before its end-of-image marker",
        f"{images / '000005.jpg'}: not a JPEG, PNG, GIF or BMP image",
    ]
