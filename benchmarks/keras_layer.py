"""What a Keras 3 layer costs as a step, and what the Keras target layouts cost.

    python benchmarks/keras_layer.py [--images 320] [--rounds 3]

Side by side (alternating rounds) on the noisy 640×480 JPEG records, resized to 320×320 in
static batches of 16: a horizontal flip as object_input's ``random_horizontal_flip`` and as
``keras.layers.RandomFlip`` through the ``keras_layer`` step (seeded per example), then the native
flip with ``keras=True`` and with ``keras="detection"`` (boxes converted to ``xyxy`` pixels).
"""

from __future__ import annotations

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import tensorflow as tf
from common import interleaved_streams, report_streams, write_benchmark_records

import object_input as oi


def batches(pattern: str, augment: list, **options):
    """A starter for ``time_stream``: the pipeline's iterator of batch sizes."""

    def start():
        dataset = oi.make_dataset(
            pattern,
            batch_size=16,
            image_size=(320, 320),
            max_boxes=32,
            batching="static",
            seed=1,
            num_epochs=None,
            augment=augment,
            **options,
        )
        return (int(tf.shape(tf.nest.flatten(batch)[0])[0]) for batch in dataset)

    return start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=320)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pattern = write_benchmark_records(tmp, num_examples=128)
        flip = keras.layers.RandomFlip("horizontal", bounding_box_format="xyxy")
        results = interleaved_streams(
            {
                "random_horizontal_flip": batches(pattern, ["random_horizontal_flip"]),
                "keras_layer(RandomFlip)": batches(pattern, [flip]),
                "random_horizontal_flip, keras=True": batches(
                    pattern, ["random_horizontal_flip"], keras=True
                ),
                "random_horizontal_flip, keras='detection'": batches(
                    pattern,
                    ["random_horizontal_flip"],
                    keras="detection",
                    bounding_box_format="xyxy",
                ),
            },
            rounds=args.rounds,
            images=args.images,
        )
    report_streams(results, "random_horizontal_flip")


if __name__ == "__main__":
    main()
