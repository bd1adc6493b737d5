"""Train a small Keras classifier on CIFAR-10 binaries with the classic CIFAR-10 recipe.

    python examples/cifar10_keras.py --data cifar-10-batches-bin [--epochs 10] [--steps 400]
    python examples/cifar10_keras.py --generate 512   # synthetic records, no download

``--data`` is the folder of the CIFAR-10 binary version (``data_batch_1.bin`` ...
``data_batch_5.bin``, ``test_batch.bin``). Without it, ``--generate N`` writes N records in the
same format whose classes differ by colour, so that a few steps already learn something.
Training reads through ``make_dataset(CIFAR10(...), augment=recipes.cifar10())`` (random 24×24
crop, flip, brightness, contrast, standardization); evaluation uses the centre crop.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np

import object_input as oi
from object_input import recipes
from object_input.sources import CIFAR10
from object_input.writers import write_cifar10

NUM_CLASSES = 10


def generate(folder: str, count: int, seed: int = 0) -> None:
    """CIFAR-10-format training and test files of noisy images tinted by their class."""
    rng = np.random.default_rng(seed)
    tints = rng.uniform(0, 255, [NUM_CLASSES, 3])
    for name, n in (("data_batch_1.bin", count), ("test_batch.bin", max(count // 4, 1))):
        labels = rng.integers(0, NUM_CLASSES, n)
        noise = rng.normal(0, 40, [n, 32, 32, 3])
        images = np.clip(tints[labels][:, None, None, :] + noise, 0, 255).astype(np.uint8)
        write_cifar10(os.path.join(folder, name), images, labels)


def model_for(size: int) -> keras.Model:
    model = keras.Sequential(
        [
            keras.Input((size, size, 3)),
            keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(NUM_CLASSES),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


# A bad record stops the run with object_input's message, not TensorFlow's wrapping of it.
@oi.readable_errors()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", help="folder of the CIFAR-10 binaries")
    parser.add_argument(
        "--generate", type=int, default=512, help="synthetic records without --data"
    )
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20, help="steps per epoch")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.data
        if folder is None:
            generate(tmp, args.generate)
            folder = tmp
        train = oi.make_dataset(
            CIFAR10(os.path.join(folder, "data_batch_*.bin")),
            augment=recipes.cifar10(),
            batch_size=args.batch_size,
            num_epochs=None,
            seed=1,
            keras=True,
        )
        test_source = CIFAR10(os.path.join(folder, "test_batch.bin"))
        test = oi.make_dataset(
            test_source,
            augment=recipes.cifar10(train=False),
            batch_size=args.batch_size,
            keras=True,
        )
        model = model_for(recipes.CIFAR10_CROP)
        model.fit(train, epochs=args.epochs, steps_per_epoch=args.steps, verbose=2)
        steps = math.ceil(test_source.num_records / args.batch_size)
        loss, accuracy = model.evaluate(test, steps=steps, verbose=0)
        print(f"test: loss {loss:.3f}, accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
