"""COCO conversion speed by worker threads: images/s and the ratio to one worker.

    python benchmarks/convert.py [--images 200] [--height 480] [--width 640] [--rounds 3]

A generated COCO set (JPEG photographs of noise, 5 polygon masks per image) is converted with
masks to 4 shards; rounds alternate between the worker counts and medians are reported. The
shards are byte-identical for every worker count (checked).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

from object_input.converters import convert_coco
from object_input.writers.parallel import default_workers


def write_coco(
    directory: str, images: int, height: int, width: int, seed: int = 0, photos: bool = False
) -> str:
    """A COCO annotation file and its JPEG images (noise, or with ``photos`` crops of
    scikit-image's sample photographs at quality 90) under ``directory``; returns the JSON
    path."""
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(directory, "images"), exist_ok=True)
    entries, annotations = [], []
    if photos:
        from common import photo_crops

        crops = photo_crops(images, height, width, rng)
    for index in range(images):
        if photos:
            jpeg = tf.io.encode_jpeg(next(crops), quality=90)
        else:
            jpeg = tf.io.encode_jpeg(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
        name = f"{index:06d}.jpg"
        tf.io.write_file(os.path.join(directory, "images", name), jpeg)
        entries.append({"id": index, "file_name": name, "height": height, "width": width})
        for _ in range(5):
            x, y = rng.uniform(0, width * 0.6), rng.uniform(0, height * 0.6)
            w, h = width * 0.3, height * 0.3
            polygon = [x, y, x + w, y + h * 0.2, x + w * 0.7, y + h, x + w * 0.1, y + h * 0.8]
            annotations.append(
                {
                    "id": len(annotations),
                    "image_id": index,
                    "category_id": int(rng.integers(1, 4)),
                    "bbox": [x, y, w, h],
                    "area": w * h / 2,
                    "iscrowd": 0,
                    "segmentation": [polygon],
                }
            )
    path = os.path.join(directory, "instances.json")
    categories = [{"id": i, "name": f"class{i}"} for i in (1, 2, 3)]
    with open(path, "w") as file:
        json.dump({"images": entries, "annotations": annotations, "categories": categories}, file)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=200, help="images in the COCO set")
    parser.add_argument("--height", type=int, default=480, help="image height")
    parser.add_argument("--width", type=int, default=640, help="image width")
    parser.add_argument("--rounds", type=int, default=3, help="timing rounds per worker count")
    args = parser.parse_args()
    counts = sorted({1, 2, default_workers()})
    with tempfile.TemporaryDirectory() as tmp:
        annotations = write_coco(tmp, args.images, args.height, args.width)
        seconds: dict[int, list[float]] = {n: [] for n in counts}
        outputs: dict[int, list[bytes]] = {}
        for _ in range(args.rounds):
            for workers in counts:
                start = time.perf_counter()
                result = convert_coco(
                    annotations,
                    os.path.join(tmp, "images"),
                    os.path.join(tmp, f"out{workers}", "train"),
                    num_shards=4,
                    num_workers=workers,
                    progress=False,
                )
                seconds[workers].append(time.perf_counter() - start)
                outputs[workers] = [tf.io.gfile.GFile(p, "rb").read() for p in result.paths]
        assert all(o == outputs[1] for o in outputs.values()), "output depends on workers"
    base = statistics.median(seconds[1])
    print(f"{args.images} images {args.width}x{args.height}, 5 masks each; {os.cpu_count()} CPUs")
    for workers in counts:
        median = statistics.median(seconds[workers])
        print(
            f"  workers={workers:<3d} {args.images / median:8.1f} images/s   "
            f"x{base / median:.2f} vs 1 worker"
        )


if __name__ == "__main__":
    main()
