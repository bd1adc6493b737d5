"""Per-pixel segmentation on an Earth Engine TFRecord export, and the predictions written back.

    python examples/earthengine_segmentation.py [--out DIR] [--epochs 3] [--steps 20]

Earth Engine cannot be reached from here, so the script first writes an export the way Earth
Engine does (``Export.image.toCloudStorage(..., fileFormat="TFRecord")``): a scene of three
bands and a ``water`` label band, cut into 16 × 16 patches buffered for a 5 × 5 kernel, over
several files, with its mixer. Then it

1. reads the patches with ``sources.EarthEngine`` and trains a tiny per-pixel Keras model
   (bands → water probability) on shuffled batches;
2. predicts every patch in export order and writes the predictions with
   ``earthengine.write_predictions`` (buffer cropped off), ready for
   ``earthengine upload image --asset_id=... predictions.tfrecord.gz export-mixer.json``;
3. reads the predictions back, stitches them into one georeferenced array and saves
   ``water.png`` (label on the left, prediction on the right).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import tensorflow as tf

from object_input import earthengine, fields, make_dataset, readable_errors
from object_input.sources import EarthEngine

BANDS = ["B2", "B3", "B8"]
PATCH = 16
KERNEL = 5
# A 30 m UTM grid: the affine of the export's mixer (xScale, xShear, x0, yShear, yScale, y0).
AFFINE = (30.0, 0.0, 500000.0, 0.0, -30.0, 4200000.0)


def write_scene(prefix: str, seed: int = 0) -> None:
    """A 64 × 96 scene: lakes are dark in the near infrared (B8) and bright in blue (B2)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:64, 0:96]
    water = np.zeros((64, 96), bool)
    for _ in range(6):
        cy, cx, r = rng.uniform(0, 64), rng.uniform(0, 96), rng.uniform(5, 14)
        water |= (y - cy) ** 2 + (x - cx) ** 2 < r**2
    noise = rng.normal(0, 0.04, (64, 96, 3))
    bands = np.where(water[..., None], [0.12, 0.08, 0.03], [0.06, 0.09, 0.35]) + noise
    scene = np.concatenate([bands, water[..., None]], axis=-1)
    earthengine.write_export(
        scene,
        prefix,
        band_names=[*BANDS, "water"],
        patch_size=PATCH,
        kernel_size=KERNEL,
        patches_per_file=7,
        affine=AFFINE,
        crs="EPSG:32633",
    )


def inputs_and_labels(batch: dict) -> tuple[tf.Tensor, tf.Tensor]:
    return batch[fields.IMAGE][..., :3], batch[fields.IMAGE][..., 3:]


def build_model(patch_size: tuple[int, int]) -> keras.Model:
    """Per pixel: a 3 × 3 look around (the kernel buffer feeds it at patch edges) then 1 × 1."""
    inputs = keras.Input((*patch_size, len(BANDS)))
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
    outputs = keras.layers.Conv2D(1, 1, activation="sigmoid")(x)
    model = keras.Model(inputs, outputs)
    model.compile(keras.optimizers.Adam(0.05), "binary_crossentropy", metrics=["accuracy"])
    return model


# A bad record stops the run with object_input's message, not TensorFlow's wrapping of it.
@readable_errors()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="earthengine_example", help="folder for all outputs")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20, help="steps per epoch")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    prefix = os.path.join(args.out, "export")
    write_scene(prefix)
    mixer = earthengine.Mixer.load(f"{prefix}-mixer.json")
    source = EarthEngine(
        prefix, bands=[*BANDS, "water"], patch_size=PATCH, kernel_size=KERNEL, mixer=mixer
    )
    print(f"{source}: {mixer.total_patches} patches, {mixer.rows} × {mixer.patches_per_row}")

    keras.utils.set_random_seed(0)
    train = make_dataset(
        source, batch_size=4, shuffle=True, seed=0, num_epochs=None, drop_remainder=True
    ).map(inputs_and_labels)
    model = build_model(source.buffered_size)  # the patch with its kernel buffer
    model.fit(train, epochs=args.epochs, steps_per_epoch=args.steps, verbose=2)

    # Export order (the source's default): prediction i belongs to patch i.
    ordered = make_dataset(source, batch_size=8).map(lambda b: inputs_and_labels(b)[0])
    predictions = model.predict(ordered, steps=-(-mixer.total_patches // 8), verbose=0)
    out = os.path.join(args.out, "predictions.tfrecord.gz")
    count = earthengine.write_predictions(
        predictions, out, mixer, band_names=["water_probability"], kernel_size=KERNEL
    )
    print(f"wrote {count} patches to {out}")

    written = EarthEngine(out, bands=["water_probability"], patch_size=PATCH, mixer=mixer)
    probability, affine = earthengine.stitch(make_dataset(written, batch_size=8), mixer)
    labels, _ = earthengine.stitch(
        (batch[fields.IMAGE][..., 3:] for batch in make_dataset(source, batch_size=8)), mixer
    )
    accuracy = float(np.mean((probability > 0.5) == (labels > 0.5)))
    print(f"stitched {probability.shape[:2]} at {affine}; pixel accuracy {accuracy:.3f}")
    picture = np.concatenate([labels, np.ones_like(labels[:, :2]), probability], axis=1)
    png = os.path.join(args.out, "water.png")
    tf.io.write_file(png, tf.io.encode_png(np.round(picture * 255).astype(np.uint8)))
    print(f"saved {png}")


if __name__ == "__main__":
    main()
