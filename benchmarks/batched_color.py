"""The colour steps on the batch against the exact colour steps: pixel difference and CPU cost.

    python benchmarks/batched_color.py [--images 400] [--rounds 3] [--sizes 512,320]

For each image set (noisy and photographs) and each output size, ``make_dataset`` with the
standard six steps runs with ``trailing_steps="exact"`` (colour on the crop, per example, native
kernels, before the resize) and ``trailing_steps="batched"`` (colour after the resize, on the
batch, one XLA-compiled colour pass). The same seed gives both the same flips, crops and colour
parameters, so their batches differ only by where the colour runs: the difference is measured on
the first ``--compare-images`` images, in levels of 255. Then both are timed side by side
(alternating rounds), with flip + crop only as the reference without colour.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
from common import IMAGE_SETS, interleaved_streams, report_streams
from speed import STANDARD_STEPS, dataset_batches

import object_input as oi
from object_input import fields


def dataset(pattern: str, size: int, steps=STANDARD_STEPS, **options):
    """The standard pipeline at ``size`` × ``size``; ``options`` override make_dataset's."""
    return oi.make_dataset(
        pattern,
        batch_size=8,
        image_size=(size, size),
        max_boxes=100,
        seed=1,
        num_epochs=None,
        augment=list(steps),
        **options,
    )


def difference(pattern: str, size: int, images: int) -> np.ndarray:
    """Absolute differences, batched minus exact colour, over ``images`` images."""
    pairs = zip(
        dataset(pattern, size, trailing_steps="exact"),
        dataset(pattern, size, trailing_steps="batched"),
        strict=False,
    )
    diffs = []
    for _, (exact, batched) in zip(range(images // 8), pairs, strict=False):
        diffs.append(np.abs(batched[fields.IMAGE].numpy() - exact[fields.IMAGE].numpy()).ravel())
    return np.concatenate(diffs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare-images", type=int, default=64)
    parser.add_argument("--sizes", default="512,320")
    parser.add_argument("--sets", default=",".join(IMAGE_SETS))
    parser.add_argument("--data", default="/tmp/oi-bench")
    args = parser.parse_args()
    os.makedirs(args.data, exist_ok=True)
    for image_set in args.sets.split(","):
        pattern = IMAGE_SETS[image_set](args.data)
        for size in (int(s) for s in args.sizes.split(",")):
            diff = difference(pattern, size, args.compare_images)
            print(
                f"\n{image_set}, {size}×{size}: |batched - exact| over {diff.size} values: "
                f"mean {diff.mean():.2f}, median {np.median(diff):.2f}, "
                f"99th percentile {np.percentile(diff, 99):.1f}, max {diff.max():.1f} (of 255)"
            )
            candidates = {
                "flip + crop only": dataset_batches(
                    lambda p=pattern, s=size: dataset(p, s, steps=STANDARD_STEPS[:2])
                ),
                **{
                    f"standard, trailing_steps={stage!r}": dataset_batches(
                        lambda p=pattern, s=size, c=stage: dataset(p, s, trailing_steps=c)
                    )
                    for stage in ("exact", "batched")
                },
            }
            results = interleaved_streams(candidates, args.rounds, args.images)
            report_streams(results, "standard, trailing_steps='exact'")
            base = results["flip + crop only"].cpu_s_per_image
            for name in list(candidates)[1:]:
                cost = (results[name].cpu_s_per_image - base) * 1000
                print(f"  colour CPU ms/img over flip + crop, {name}: {cost:.2f}")


if __name__ == "__main__":
    main()
