"""Padding saved by ``group_by_aspect_ratio`` on a mixed-aspect set (a count, not a timing).

    python benchmarks/aspect_padding.py [--images 400] [--batch-size 8] [--scale 4]

Writes ``--images`` synthetic examples whose sizes are drawn from COCO-like shapes (640×480,
480×640, 640×427, 427×640, 640×640, 500×375, 375×500, 800×400 and 400×800, divided by
``--scale``), then batches them with dynamic padding, with and without grouping, and reports the
padded pixels: padding = (batch size × batch height × batch width − image pixels) / image pixels.
"""

from __future__ import annotations

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

import object_input as oi
from object_input import fields
from object_input.writers import build_example, write_tfrecords
from object_input.writers.synthetic import make_example

SIZES = (
    (480, 640),
    (640, 480),
    (427, 640),
    (640, 427),
    (640, 640),
    (375, 500),
    (500, 375),
    (400, 800),
    (800, 400),
)


def padding(directory: str, batch_size: int, group: bool) -> tuple[float, int]:
    """(padded pixels / image pixels, batches) over one epoch."""
    padded = content = batches = 0
    dataset = oi.make_dataset(directory, batch_size=batch_size, seed=1, group_by_aspect_ratio=group)
    for batch in dataset:
        images = batch[fields.IMAGE]
        shapes = batch[fields.IMAGE_SHAPE].numpy()
        padded += int(np.prod(images.shape[:3]))
        content += int(np.sum(shapes[:, 0] * shapes[:, 1]))
        batches += 1
    return (padded - content) / content, batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--scale", type=int, default=4)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    examples = []
    for index in range(args.images):
        height, width = SIZES[rng.integers(len(SIZES))]
        arrays = make_example(rng, height // args.scale, width // args.scale, index=index)
        examples.append(build_example(arrays.pop("image"), **arrays))
    with tempfile.TemporaryDirectory() as directory:
        write_tfrecords(examples, os.path.join(directory, "mixed"), num_shards=2)
        for group in (False, True):
            ratio, batches = padding(directory, args.batch_size, group)
            print(
                f"group_by_aspect_ratio={group!s:5}  padding {100 * ratio:5.1f}% of the image "
                f"pixels  ({batches} batches)"
            )


if __name__ == "__main__":
    main()
