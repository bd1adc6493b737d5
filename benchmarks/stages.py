"""Throughput of the pipeline's stages, side by side in one process.

    python benchmarks/stages.py [--images 1024] [--rounds 3] [--data /tmp/oi-bench]

Measures images/s for: reading records only; decode only (the full detection schema); the least
pipeline (decode + resize + batch); and make_dataset with flip + resize. Each round builds every
candidate afresh and times only the images after its first batch (build and tracing excluded);
rounds alternate between candidates and medians are reported, with ratios to decode-only.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf
from common import interleaved_streams, report_streams, write_benchmark_records

import object_input as oi
from object_input import fields

AUTOTUNE = tf.data.AUTOTUNE
SIZE = (512, 512)


def starter(
    make: Callable[[], tf.data.Dataset], count: Callable[[object], int]
) -> Callable[[], Iterator[int]]:
    """A starter for ``common.time_stream``: builds the dataset, yields images per element."""
    return lambda: (count(element) for element in make())


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

    def decode_resize(serialized: tf.Tensor) -> tf.Tensor:
        encoded = tf.io.parse_single_example(
            serialized, {"image/encoded": tf.io.FixedLenFeature((), tf.string)}
        )["image/encoded"]
        return tf.image.resize(tf.io.decode_jpeg(encoded, channels=3), SIZE)

    def batch_size(batch: object) -> int:
        return int(batch.shape[0])

    candidates = {
        "read records only": starter(
            lambda: records().batch(args.batch_size).prefetch(AUTOTUNE), batch_size
        ),
        "decode only (full schema)": starter(
            lambda: records().map(decoder, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE),
            lambda element: 1,
        ),
        "least: decode + resize + batch": starter(
            lambda: (
                records()
                .map(decode_resize, num_parallel_calls=AUTOTUNE)
                .batch(args.batch_size)
                .prefetch(AUTOTUNE)
            ),
            batch_size,
        ),
        "make_dataset: flip + resize": starter(
            lambda: oi.make_dataset(
                pattern,
                batch_size=args.batch_size,
                num_epochs=None,
                seed=1,
                augment=["random_horizontal_flip"],
                image_size=SIZE,
                max_boxes=100,
            ),
            lambda batch: int(batch[fields.IMAGE].shape[0]),
        ),
    }
    results = interleaved_streams(candidates, args.rounds, args.images)
    report_streams(results, "decode only (full schema)")


if __name__ == "__main__":
    main()
