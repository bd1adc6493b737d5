"""Reading speed of the same CIFAR-sized examples through each source, with the CIFAR-10 recipe.

    python benchmarks/sources.py [--records 4096] [--images 8192] [--rounds 3]

The same ``--records`` random 32 × 32 images and labels are read as a CIFAR-10 binary
(``CIFAR10``, a ``FixedLength`` preset), a TFRecord of detection Examples with raw pixels
(``TFRecord``), numpy arrays in memory (``Arrays``) and a Python generator (``Generator``), each
through ``make_dataset(..., augment=recipes.cifar10(), batch_size=128)``. Rounds alternate;
medians are reported, with each candidate's ratio to the CIFAR binary.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from common import interleaved_streams, report_streams
from speed import dataset_batches

import object_input as oi
from object_input import fields, recipes
from object_input.sources import CIFAR10, Arrays, Generator, TFRecord
from object_input.writers import build_example, write_cifar10, write_tfrecords


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=4096)
    parser.add_argument("--images", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128)
    args = parser.parse_args()
    folder = f"/tmp/oi-bench-sources-{args.records}"
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, [args.records, 32, 32, 3], dtype=np.uint8)
    labels = rng.integers(0, 10, args.records).astype(np.int32)
    binary = os.path.join(folder, "data_batch_1.bin")
    write_cifar10(binary, images, labels)
    prefix = os.path.join(folder, "examples")
    if not tf.io.gfile.glob(prefix + "-*"):
        write_tfrecords(
            (build_example(image, image_format="raw") for image in images), prefix, num_shards=1
        )

    def generate():
        for image, label in zip(images, labels, strict=True):
            yield {fields.IMAGE: image, fields.LABEL: label}

    signature = {
        fields.IMAGE: tf.TensorSpec([32, 32, 3], tf.uint8),
        fields.LABEL: tf.TensorSpec([], tf.int32),
    }
    sources = {
        "CIFAR10 binary (FixedLength)": lambda: CIFAR10(binary),
        "TFRecord, raw pixels": lambda: TFRecord(prefix + "-*"),
        "Arrays (in memory)": lambda: Arrays({fields.IMAGE: images, fields.LABEL: labels}),
        "Generator (Python)": lambda: Generator(generate, signature),
    }

    def starter(make):
        return dataset_batches(
            lambda: oi.make_dataset(
                make(),
                augment=recipes.cifar10(),
                batch_size=args.batch_size,
                num_epochs=None,
                seed=1,
            )
        )

    candidates = {name: starter(make) for name, make in sources.items()}
    results = interleaved_streams(candidates, args.rounds, args.images)
    report_streams(results, "CIFAR10 binary (FixedLength)")


if __name__ == "__main__":
    main()
