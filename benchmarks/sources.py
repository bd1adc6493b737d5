"""Reading speed of the same CIFAR-sized examples through each source, with the CIFAR-10 recipe.

    python benchmarks/sources.py [--records 4096] [--images 8192] [--rounds 3] [--no-hubs]

The same ``--records`` random 32 × 32 images and labels are read as a CIFAR-10 binary
(``CIFAR10``, a ``FixedLength`` preset), a TFRecord of detection Examples with raw pixels
(``TFRecord``), numpy arrays in memory (``Arrays``) and a Python generator (``Generator``), each
through ``make_dataset(..., augment=recipes.cifar10(), batch_size=128)``.

With the ``tfds`` and ``hf`` extras, the hubs' rows follow, their images PNG-encoded as the hubs
store them (a TFRecord of PNG Examples is the like-for-like file row): a TensorFlow Datasets
dataset prepared locally through ``sources.TFDS``, against ``tfds.load`` wrapped as a
``sources.Dataset`` (what a user writes without the source); a Hugging Face ``datasets.Dataset``
through ``sources.HuggingFace``, its streaming form, and ``Dataset.to_tf_dataset`` (Hugging Face's
own reader) as their peer. Rounds alternate; medians are reported, with each candidate's ratio to
the CIFAR binary.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from common import interleaved_streams, report_streams
from speed import dataset_batches

import object_input as oi
from object_input import fields, recipes
from object_input.sources import CIFAR10, Arrays, Dataset, Generator, TFRecord
from object_input.writers import build_example, encode_image, write_cifar10, write_tfrecords

Sources = dict[str, Callable[[], Any]]


def tfds_sources(folder: str, images: np.ndarray, labels: np.ndarray) -> Sources:
    """A TFDS dataset of the images, prepared in ``folder``: the source and ``tfds.load``."""
    import tensorflow_datasets as tfds

    from object_input.sources import TFDS

    class Cifarish(tfds.core.GeneratorBasedBuilder, skip_registration=True):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            features = {
                "image": tfds.features.Image(shape=(32, 32, 3)),
                "label": tfds.features.ClassLabel(num_classes=10),
            }
            return tfds.core.DatasetInfo(
                builder=self, features=tfds.features.FeaturesDict(features)
            )

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            for index, (image, label) in enumerate(zip(images, labels, strict=True)):
                yield index, {"image": image, "label": int(label)}

    builder = Cifarish(data_dir=os.path.join(folder, "tfds"))
    builder.download_and_prepare()

    def loaded() -> Dataset:
        # No autocache, as sources.TFDS reads: TFDS caches a dataset this small in memory and
        # would skip decoding on every pass after the first.
        read_config = tfds.ReadConfig(try_autocache=False)
        examples = builder.as_dataset(split="train", shuffle_files=True, read_config=read_config)
        return Dataset(
            examples.map(lambda e: {fields.IMAGE: e["image"], fields.LABEL: e["label"]}),
            name="tfds.load",
        )

    return {
        "TFDS (sources.TFDS)": lambda: TFDS(builder, split="train"),
        "tfds.load as a Dataset source": loaded,
    }


def hf_sources(images: np.ndarray, labels: np.ndarray) -> Sources:
    """A Hugging Face dataset of the PNG images: the source, streaming, and ``to_tf_dataset``."""
    import datasets

    from object_input.sources import HuggingFace

    features = datasets.Features(
        {"image": datasets.Image(), "label": datasets.ClassLabel(num_classes=10)}
    )
    table = datasets.Dataset.from_dict(
        {"image": [encode_image(image) for image in images], "label": labels.tolist()},
        features=features,
        split="train",
    )

    def own_reader() -> Dataset:
        examples = table.with_format("numpy").to_tf_dataset(
            batch_size=None, columns=["image", "label"], shuffle=True
        )
        return Dataset(
            examples.map(
                lambda e: {fields.IMAGE: tf.cast(e["image"], tf.uint8), fields.LABEL: e["label"]}
            ),
            name="to_tf_dataset",
        )

    return {
        "Hugging Face (sources.HuggingFace)": lambda: HuggingFace(table),
        "Hugging Face, streaming": lambda: HuggingFace(table.to_iterable_dataset()),
        "Hugging Face to_tf_dataset as a Dataset": own_reader,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=4096)
    parser.add_argument("--images", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--no-hubs", action="store_true", help="leave out the TFDS and HF rows")
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
    sources: Sources = {
        "CIFAR10 binary (FixedLength)": lambda: CIFAR10(binary),
        "TFRecord, raw pixels": lambda: TFRecord(prefix + "-*"),
        "Arrays (in memory)": lambda: Arrays({fields.IMAGE: images, fields.LABEL: labels}),
        "Generator (Python)": lambda: Generator(generate, signature),
    }
    if not args.no_hubs:
        png = os.path.join(folder, "png")
        if not tf.io.gfile.glob(png + "-*"):
            write_tfrecords((build_example(image) for image in images), png, num_shards=1)
        sources["TFRecord, PNG"] = lambda: TFRecord(png + "-*")
        sources.update(tfds_sources(folder, images, labels))
        sources.update(hf_sources(images, labels))

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
