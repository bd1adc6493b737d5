"""Train a tiny Keras classifier on a Caffe LMDB database, through the net's own Data layer.

    python examples/caffe_lmdb.py [--output DIR] [--epochs 2] [--steps 20]

It first writes what a Caffe user has: an LMDB database of raw ``Datum`` records (planar BGR
pixels, as ``convert_imageset`` writes them, keys ``%08d_<path>``), a ``mean.binaryproto`` and a
``train_val.prototxt`` whose TRAIN and TEST Data layers mirror, crop and subtract the mean. Then
``load_data_layer`` turns each layer into ``make_dataset`` settings with Caffe's arithmetic, and
Keras trains on ``(image, label)`` pairs. The images are stripes: horizontal (class 0) or vertical
(class 1), so a few steps already learn something.
"""

from __future__ import annotations

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import lmdb
import numpy as np

import object_input as oi
from object_input.config.caffe import load_data_layer
from object_input.sources._caffe_proto import message_class

SIZE, CROP = 32, 28

PROTOTXT = f"""
name: "Stripes"
layer {{
  name: "data" type: "Data" top: "data" top: "label"
  include {{ phase: TRAIN }}
  transform_param {{
    mirror: true crop_size: {CROP} mean_file: "mean.binaryproto" scale: 0.00390625
  }}
  data_param {{ source: "stripes_lmdb" batch_size: 16 backend: LMDB }}
}}
layer {{
  name: "data" type: "Data" top: "data" top: "label"
  include {{ phase: TEST }}
  transform_param {{ crop_size: {CROP} mean_file: "mean.binaryproto" scale: 0.00390625 }}
  data_param {{ source: "stripes_lmdb" batch_size: 32 backend: LMDB }}
}}
"""


def stripes(label: int, rng: np.random.Generator) -> np.ndarray:
    """A noisy ``[SIZE, SIZE, 3]`` uint8 BGR image of horizontal (0) or vertical (1) stripes."""
    period = int(rng.integers(3, 7))
    wave = (np.arange(SIZE) // period) % 2 * 160.0
    pattern = wave[:, None] if label == 0 else wave[None, :]
    color = rng.uniform(0.5, 1.0, 3)
    image = pattern[..., None] * color + rng.normal(40, 20, [SIZE, SIZE, 3])
    return np.clip(image, 0, 255).astype(np.uint8)


def write_database(folder: str, count: int = 256) -> None:
    """The LMDB of raw Datums and its mean image, as Caffe's tools would write them."""
    rng = np.random.default_rng(0)
    Datum, BlobProto = message_class("Datum"), message_class("BlobProto")
    total = np.zeros([3, SIZE, SIZE])
    env = lmdb.open(os.path.join(folder, "stripes_lmdb"), map_size=1 << 28)
    with env.begin(write=True) as txn:
        for index in range(count):
            label = index % 2
            planar = np.transpose(stripes(label, rng), [2, 0, 1])  # C × H × W, BGR
            total += planar
            datum = Datum(channels=3, height=SIZE, width=SIZE, data=planar.tobytes(), label=label)
            key = f"{index:08d}_stripes/{index}.png".encode()
            txn.put(key, datum.SerializeToString())
    env.close()
    mean = BlobProto(num=1, channels=3, height=SIZE, width=SIZE)
    mean.data.extend((total / count).astype(np.float32).ravel().tolist())
    with open(os.path.join(folder, "mean.binaryproto"), "wb") as f:
        f.write(mean.SerializeToString())
    with open(os.path.join(folder, "train_val.prototxt"), "w") as f:
        f.write(PROTOTXT)


def image_and_label(batch: dict) -> tuple:
    return batch["image"], batch["label"]


# A bad record stops the run with object_input's message, not TensorFlow's wrapping of it.
@oi.readable_errors()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", help="folder for the database (default: a temporary one)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20, help="steps per epoch")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.output or tmp
        os.makedirs(folder, exist_ok=True)
        write_database(folder)
        prototxt = os.path.join(folder, "train_val.prototxt")
        train = load_data_layer(prototxt, phase="TRAIN", root=folder)
        test = load_data_layer(prototxt, phase="TEST", root=folder)
        print("TRAIN:", train.source, "batch", train.batch_size, dict(train.transform))
        # Caffe reads in key order; shuffle=True (seeded) overrides the layer's setting.
        train_data = oi.make_dataset(config=train, shuffle=True, seed=1, num_epochs=None)
        test_data = oi.make_dataset(config=test)
        model = keras.Sequential(
            [
                keras.Input((CROP, CROP, 3)),
                keras.layers.Conv2D(8, 3, strides=2, activation="relu"),
                keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
                keras.layers.GlobalAveragePooling2D(),
                keras.layers.Dense(2),
            ]
        )
        model.compile(
            optimizer=keras.optimizers.Adam(0.01),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        model.fit(
            train_data.map(image_and_label),
            epochs=args.epochs,
            steps_per_epoch=args.steps,
            verbose=2,
        )
        steps = test.source.num_records // test.batch_size
        loss, accuracy = model.evaluate(test_data.map(image_and_label), steps=steps, verbose=0)
        print(f"TEST: loss {loss:.3f}, accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
