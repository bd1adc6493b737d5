"""Throughput of the pipeline's stages, side by side in one process.

    python benchmarks/stages.py [--images 1024] [--rounds 3] [--data /tmp/oi-bench]

Measures images/s for: reading records only; decode only; the least pipeline (decode + resize +
batch); and make_dataset with flip + resize. Rounds alternate between the candidates and the median
is reported, with ratios to the decode-only stage.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf
from common import count_images, interleaved_rounds, report, write_benchmark_records

import object_input as oi
from object_input import fields

AUTOTUNE = tf.data.AUTOTUNE
SIZE = (512, 512)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--data", default="/tmp/oi-bench")
    args = parser.parse_args()
    os.makedirs(args.data, exist_ok=True)
    pattern = write_benchmark_records(args.data)
    files = sorted(tf.io.gfile.glob(pattern))
    decoder = oi.ExampleDecoder()

    def records() -> tf.data.Dataset:
        return tf.data.TFRecordDataset(files, num_parallel_reads=len(files)).repeat()

    def read_only() -> int:
        return count_images(
            records().batch(args.batch_size).prefetch(AUTOTUNE), lambda b: b, args.images
        )

    def decode_only() -> int:
        ds = records().map(decoder, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)
        return count_images(ds, lambda f: f[fields.IMAGE][tf.newaxis], args.images)

    def least() -> int:
        def decode_resize(serialized):
            image = tf.io.decode_jpeg(
                tf.io.parse_single_example(
                    serialized, {"image/encoded": tf.io.FixedLenFeature((), tf.string)}
                )["image/encoded"],
                channels=3,
            )
            return tf.image.resize(image, SIZE)

        ds = records().map(decode_resize, num_parallel_calls=AUTOTUNE)
        ds = ds.batch(args.batch_size).prefetch(AUTOTUNE)
        return count_images(ds, lambda b: b, args.images)

    def flip_resize() -> int:
        ds = oi.make_dataset(
            pattern,
            batch_size=args.batch_size,
            num_epochs=None,
            seed=1,
            augment=["random_horizontal_flip"],
            image_size=SIZE,
            max_boxes=100,
        )
        return count_images(ds, lambda b: b[fields.IMAGE], args.images)

    results = interleaved_rounds(
        {
            "read records only": read_only,
            "decode only (full schema)": decode_only,
            "least: decode + resize + batch": least,
            "make_dataset: flip + resize": flip_resize,
        },
        args.rounds,
    )
    report(results, "decode only (full schema)")


if __name__ == "__main__":
    main()
