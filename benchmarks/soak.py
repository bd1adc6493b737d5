"""Soak: resident memory over a long augmented run that skips bad records.

    python benchmarks/soak.py [--examples 50000] [--every 50] [--data /tmp/oi-soak]

Writes 512 JPEG records of 160×120 with 1–20 boxes (one in 64 with a class id of 0, so the
skip path, its counters and the per-record error guard run all along), then iterates
``make_dataset(on_error="skip", num_epochs=None)`` with flip, crop, colour steps and a resize to
128×128 in batches of 16 until ``--examples`` examples have passed, sampling VmRSS every
``--every`` batches. The verdict is that of ``speed.py rss``: flat when the least-squares trend
over the second half adds under 5 % of the mid-run RSS over that half. tests/test_soak.py runs a
short version of :func:`soak`.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from common import rss_mib

import object_input as oi
from object_input import fields
from object_input.writers import build_example, write_tfrecords
from object_input.writers.synthetic import make_example

STEPS = [
    ("random_horizontal_flip", {}),
    ("random_crop_image", {}),
    ("random_adjust_brightness", {}),
    ("random_adjust_contrast", {}),
]
BAD_EVERY = 64


def write_records(directory: str, num_examples: int = 512) -> str:
    """The soak records (written once); returns their glob."""
    pattern = os.path.join(directory, "soak-*.tfrecord")
    if tf.io.gfile.glob(pattern):
        return pattern
    rng = np.random.default_rng(0)

    def examples():
        for index in range(num_examples):
            arrays = make_example(
                rng, 120, 160, max_objects=20, min_objects=1, image_format="jpeg", index=index
            )
            arrays.pop("masks")
            example = build_example(arrays.pop("image"), **arrays)
            if index % BAD_EVERY == BAD_EVERY - 1:
                example.features.feature["image/object/class/label"].int64_list.value[0] = 0
            yield example

    os.makedirs(directory, exist_ok=True)
    write_tfrecords(examples(), os.path.join(directory, "soak"), 4)
    return pattern


def soak(pattern: str, examples: int, every: int) -> dict:
    """Run the pipeline for ``examples`` examples; RSS samples, trend and skip counts."""
    dataset = oi.make_dataset(
        pattern,
        batch_size=16,
        seed=1,
        augment=STEPS,
        image_size=(128, 128),
        num_epochs=None,
        shuffle_buffer_size=256,
        on_error="skip",
    )
    samples: list[tuple[int, float]] = []
    seen = 0
    began = time.perf_counter()
    for index, batch in enumerate(dataset):
        seen += int(batch[fields.IMAGE].shape[0])
        done = seen >= examples
        if index % every == 0 or done:
            samples.append((seen, rss_mib()))
        if done:
            break
    elapsed = time.perf_counter() - began
    mid, end = samples[len(samples) // 2], samples[-1]
    half = np.array(samples[len(samples) // 2 :])
    slope = np.polyfit(half[:, 0], half[:, 1], 1)[0]
    drift = slope * (end[0] - mid[0])
    return {
        "examples": seen,
        "seconds": elapsed,
        "samples": samples,
        "peak": max(value for _, value in samples),
        "slope_per_1000": slope * 1000,
        "drift": drift,
        "drift_fraction": drift / mid[1],
        "flat": abs(drift) < 0.05 * mid[1],
        "stats": oi.stats(dataset),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=50_000)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--data", default="/tmp/oi-soak")
    args = parser.parse_args()
    result = soak(write_records(args.data), args.examples, args.every)
    print(
        f"{result['examples']} examples in {result['seconds']:.0f} s "
        f"({result['examples'] / result['seconds']:.1f} examples/s)"
    )
    print(f"{'examples':>9s} {'RSS MiB':>9s}")
    for count, value in result["samples"]:
        print(f"{count:9d} {value:9.1f}")
    print(
        f"peak {result['peak']:.0f} MiB; trend over the second half "
        f"{result['slope_per_1000']:+.2f} MiB per 1000 examples, {result['drift']:+.0f} MiB "
        f"({result['drift_fraction']:+.1%} of mid): {'flat' if result['flat'] else 'NOT flat'}"
    )
    print(result["stats"].format())


if __name__ == "__main__":
    main()
