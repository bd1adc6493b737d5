"""Deferred decoding off, on, and on with JPEG DCT scaling, for the standard augmentation.

    python benchmarks/defer_decode.py [--height 960] [--width 1280] [--size 320] [--images 240]

The standard six steps begin with a flip and ``random_crop_image``, so with ``defer_decode`` only
the crop window of each JPEG is decoded; with ``jpeg_dct_scaling`` too, a window at least twice
the output size (``--size`` square) decodes at 1/2, 1/4 or 1/8 scale. The records are random
crops of scikit-image's photographs (``--set photos``) or generated shapes on noise (``noisy``).
The pixel difference of DCT scaling against the exact decode is measured on the same seed.
Rounds alternate; medians are reported.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from common import IMAGE_SETS, interleaved_streams, report_streams
from speed import dataset_batches, standard_dataset

import object_input as oi
from object_input import fields


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--height", type=int, default=960)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--size", type=int, default=320, help="output image size (square)")
    parser.add_argument("--set", choices=sorted(IMAGE_SETS), default="photos")
    parser.add_argument("--records", type=int, default=96)
    parser.add_argument("--images", type=int, default=240)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    data = f"/tmp/oi-bench-{args.height}x{args.width}"
    os.makedirs(data, exist_ok=True)
    pattern = IMAGE_SETS[args.set](data, args.records, args.height, args.width)
    variants = {
        "defer_decode=False": {"defer_decode": False},
        "defer_decode=True": {"defer_decode": True},
        "defer_decode=True, jpeg_dct_scaling=True": {"jpeg_dct_scaling": True},
    }

    def make(decoding: dict) -> tf.data.Dataset:
        return standard_dataset(
            pattern,
            args.batch_size,
            image_size=(args.size, args.size),
            decoding=oi.DecodeOptions(**decoding),
        )

    pairs = zip(make({}), make({"jpeg_dct_scaling": True}), strict=False)
    diffs = [
        np.abs(exact[fields.IMAGE].numpy() - scaled[fields.IMAGE].numpy()).ravel()
        for _, (exact, scaled) in zip(range(8), pairs, strict=False)
    ]
    diff = np.concatenate(diffs)
    print(
        f"{args.set} {args.height}×{args.width} → {args.size}×{args.size}: |DCT-scaled - exact| "
        f"mean {diff.mean():.2f}, 99th percentile {np.percentile(diff, 99):.1f}, "
        f"max {diff.max():.0f} (of 255) over {len(diffs) * args.batch_size} images"
    )
    candidates = {
        name: dataset_batches(lambda decoding=decoding: make(decoding))
        for name, decoding in variants.items()
    }
    results = interleaved_streams(candidates, args.rounds, args.images)
    report_streams(results, "defer_decode=False")


if __name__ == "__main__":
    main()
