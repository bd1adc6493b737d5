"""Train a tiny box regressor with Keras on object_input batches.

    python examples/train_keras.py [--data DIR] [--epochs 2] [--steps 20]

Without ``--data`` it writes the synthetic shapes dataset first. The point is the input side:
static batches (fixed image size and box count, as XLA and TPUs want), augmentation from a list of
Object Detection API steps, a seed for reproducible batches, and ``keras=True`` so that
``model.fit`` gets ``(images, {"boxes", "classes"})`` with padded classes set to -1.
"""

from __future__ import annotations

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras

import object_input as oi
from object_input.writers.synthetic import write_synthetic_dataset

IMAGE_SIZE = (128, 128)
MAX_BOXES = 8
AUGMENT = [
    ("random_horizontal_flip", {}),
    ("random_crop_image", {"min_object_covered": 0.5}),
    ("random_adjust_brightness", {}),
    ("random_adjust_contrast", {}),
]


def build_model() -> keras.Model:
    """A deliberately small network: one box and one class score per slot."""
    inputs = keras.Input((*IMAGE_SIZE, 3))
    x = keras.layers.Rescaling(1 / 255)(inputs)
    for filters in (16, 32, 64):
        x = keras.layers.Conv2D(filters, 3, strides=2, activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    boxes = keras.layers.Reshape((MAX_BOXES, 4), name="boxes")(
        keras.layers.Dense(MAX_BOXES * 4, activation="sigmoid")(x)
    )
    classes = keras.layers.Reshape((MAX_BOXES,), name="classes")(keras.layers.Dense(MAX_BOXES)(x))
    return keras.Model(inputs, {"boxes": boxes, "classes": classes})


# A bad record stops the run with object_input's message, not TensorFlow's wrapping of it.
@oi.readable_errors()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", help="folder of TFRecords (default: generate synthetic data)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20, help="steps per epoch")
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or tmp
        if not args.data:
            write_synthetic_dataset(data, num_examples=128, num_shards=4, seed=0)
        dataset = oi.make_dataset(
            data,
            batch_size=args.batch_size,
            augment=AUGMENT,
            image_size=IMAGE_SIZE,
            max_boxes=MAX_BOXES,
            batching="static",
            box_overflow="truncate",
            keras=True,
            num_epochs=None,
            seed=1,
        )
        model = build_model()
        model.compile(optimizer="adam", loss={"boxes": "mse", "classes": "mse"})
        model.fit(dataset, epochs=args.epochs, steps_per_epoch=args.steps, verbose=2)


if __name__ == "__main__":
    main()
