"""Deferred decoding on and off, for the standard augmentation at a chosen image size.

    python benchmarks/defer_decode.py [--height 960] [--width 1280] [--images 240] [--rounds 3]

The standard six steps begin with a flip and ``random_crop_image``, so with ``defer_decode`` only
the crop window of each JPEG is decoded. Rounds alternate; medians are reported.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from common import interleaved_streams, report_streams, write_benchmark_records
from speed import dataset_batches, standard_dataset

import object_input as oi


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--height", type=int, default=960)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--records", type=int, default=96)
    parser.add_argument("--images", type=int, default=240)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    data = f"/tmp/oi-bench-{args.height}x{args.width}"
    os.makedirs(data, exist_ok=True)
    pattern = write_benchmark_records(data, args.records, args.height, args.width)
    candidates = {
        f"defer_decode={defer}": dataset_batches(
            lambda defer=defer: standard_dataset(
                pattern, args.batch_size, decoding=oi.DecodeOptions(defer_decode=defer)
            )
        )
        for defer in (True, False)
    }
    results = interleaved_streams(candidates, args.rounds, args.images)
    report_streams(results, "defer_decode=False")


if __name__ == "__main__":
    main()
