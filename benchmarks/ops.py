"""What each registered augmentation step adds on its own, against no steps and its peers.

    python benchmarks/ops.py [--steps a,b] [--images 256] [--rounds 3] [--quick] [--recipe NAME]

On the photos set (640×480 JPEG crops of scikit-image's photographs, 1–20 boxes; needs the
``bench`` extra), every registered step runs alone in
``make_dataset(augment=[step], image_size=(512, 512), batch_size=8)``, side by side with the same
pipeline without steps: all candidates in one process, every round building each afresh, rounds
alternating, medians reported. A step runs with its registration's ``demo_params`` (probability 1
where it has one; pixel sizes for the photographs from ``PHOTO_SIZES``). Rows for the combining
steps' pipelines (Mosaic, MixUp) and, with ``--recipe``, for a recipe of ``object_input.recipes``
follow (a recipe that takes an ``image_size`` gets the pipeline's).

Peers, where they have the op:

- Albumentations (OpenCV): the op then ``Resize(512, 512)``, minus ``NoOp`` then the same resize,
  on the same decoded photographs and their boxes, one OpenCV thread, in a subprocess so that
  OpenCV's threads do not run beside TensorFlow's;
- Albumentations for ``--recipe yolo``: ``Mosaic`` (its three partners passed per call, as
  Albumentations takes them, from the next decoded photographs), ``HorizontalFlip``, ``Affine``
  and ``HueSaturationValue`` with the recipe's parameters (``ALBUMENTATIONS_RECIPES``), then the
  same resize;
- Keras 3 preprocessing layers, as the ``keras_layer`` step in the same pipeline.

Figures: the CPU ms per image each adds (process CPU time), the ratio of object_input's to
Albumentations', and object_input's images/s over those of no steps.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

SIZE = (512, 512)
BASELINE = "no steps"
# A step runs with its registration's demo_params (and probability 1 where it has one); these
# replace the demo sizes, in pixels, chosen for the step-spec tests' 12 x 17 example, by sizes
# for these 640 x 480 photographs.
PHOTO_SIZES: dict[str, dict[str, Any]] = {
    "random_absolute_pad_image": {"max_height_padding": 64, "max_width_padding": 64},
    "random_crop_to_size": {"height": 384, "width": 384},
    "random_resize_method": {"target_height": 512, "target_width": 512},
    "resize_to_range": {"min_dimension": 512, "max_dimension": 640},
    "random_downscale_to_target_pixels": {
        "min_target_pixels": 100_000,
        "max_target_pixels": 200_000,
    },
    "caffe_transform": {"crop_size": 448},
    "caffe_ssd_resize": {"height": 300, "width": 300},
    "mosaic": {"output_size": SIZE},
}
# Steps not timed alone: the Keras peers run through keras_layer.
NOT_ALONE = ("keras_layer",)
# Pipelines of the combining steps, run when any of them is among the steps asked for.
COMBINING = ("mosaic", "mixup")
COMBINED: dict[str, list] = {
    "mosaic, mixup": [("mosaic", {"output_size": SIZE}), ("mixup", {})],
    "flip, mosaic, mixup": [
        ("random_horizontal_flip", {}),
        ("mosaic", {"output_size": SIZE}),
        ("mixup", {}),
    ],
}
# Albumentations' op for a step, built from the albumentations module.
ALBUMENTATIONS: dict[str, Callable[[Any], Any]] = {
    "random_horizontal_flip": lambda A: A.HorizontalFlip(p=1.0),
    "random_vertical_flip": lambda A: A.VerticalFlip(p=1.0),
    "random_rotation90": lambda A: A.RandomRotate90(p=1.0),
    "random_rotation": lambda A: A.Rotate(limit=10, border_mode=0, p=1.0),
    "random_affine": lambda A: A.Affine(
        rotate=(-10, 10), shear=(-10, 10), translate_percent=(-0.1, 0.1), p=1.0
    ),
    "random_cutout": lambda A: A.CoarseDropout(
        num_holes_range=(1, 1), hole_height_range=(0.1, 0.3), hole_width_range=(0.1, 0.3), p=1.0
    ),
    "random_black_patches": lambda A: A.CoarseDropout(
        num_holes_range=(1, 10), hole_height_range=(0.1, 0.1), hole_width_range=(0.1, 0.1), p=1.0
    ),
    "random_gaussian_blur": lambda A: A.GaussianBlur(blur_limit=0, sigma_limit=(0.1, 2.0), p=1.0),
    "random_sharpness": lambda A: A.Sharpen(p=1.0),
    "random_adjust_brightness": lambda A: A.RandomBrightnessContrast(
        brightness_limit=0.2, contrast_limit=0.0, p=1.0
    ),
    "random_adjust_contrast": lambda A: A.RandomBrightnessContrast(
        brightness_limit=0.0, contrast_limit=(-0.2, 0.25), p=1.0
    ),
    "random_adjust_hue": lambda A: A.HueSaturationValue(
        hue_shift_limit=7, sat_shift_limit=0, val_shift_limit=0, p=1.0
    ),
    "random_adjust_saturation": lambda A: A.HueSaturationValue(
        hue_shift_limit=0, sat_shift_limit=(-20, 25), val_shift_limit=0, p=1.0
    ),
    "random_distort_color": lambda A: A.ColorJitter(p=1.0),
    "random_rgb_to_gray": lambda A: A.ToGray(p=1.0),
    "rgb_to_gray": lambda A: A.ToGray(p=1.0),
    "random_solarize": lambda A: A.Solarize(threshold_range=(0.5, 1.0), p=1.0),
    "random_posterize": lambda A: A.Posterize(num_bits=(4, 8), p=1.0),
    "random_equalize": lambda A: A.Equalize(p=1.0),
    "random_autocontrast": lambda A: A.AutoContrast(p=1.0),
    "random_invert": lambda A: A.InvertImg(p=1.0),
    "random_crop_image": lambda A: A.BBoxSafeRandomCrop(p=1.0),
    "random_crop_to_size": lambda A: A.RandomCrop(384, 384, p=1.0),
    "random_crop_to_aspect_ratio": lambda A: A.RandomCrop(480, 480, p=1.0),
    "random_absolute_pad_image": lambda A: A.PadIfNeeded(
        min_height=480 + 64, min_width=640 + 64, position="random", p=1.0
    ),
    "random_pad_to_aspect_ratio": lambda A: A.PadIfNeeded(min_height=640, min_width=640, p=1.0),
    "random_image_scale": lambda A: A.RandomScale(scale_limit=(-0.5, 1.0), p=1.0),
    "random_jpeg_quality": lambda A: A.ImageCompression(quality_range=(1, 100), p=1.0),
    "random_pixel_value_scale": lambda A: A.MultiplicativeNoise(
        multiplier=(0.9, 1.1), per_channel=True, elementwise=True, p=1.0
    ),
    "normalize_image": lambda A: A.Normalize(mean=0.0, std=1.0, max_pixel_value=255.0),
    "per_image_standardization": lambda A: A.Normalize(normalization="image"),
}


def albumentations_yolo(A: Any, augment: list) -> list:
    """``recipes.yolo``'s steps as Albumentations ops, from the recipe's own parameters.

    Mosaic of 2 × 2 cells of the canvas size, each photograph fitted inside its cell
    (``contain``) and the canvas-sized view's centre anywhere (``center_range`` (0, 1)), as the
    step places its four; the affine keeps the aspect ratio (one scale, as YOLO draws it).
    ``HueSaturationValue`` shifts where YOLO and the recipe's saturation step multiply: the
    shifts are the gains' change at mid saturation and value, the hue's in OpenCV's 0-180 units.
    """
    import cv2

    params = dict(augment)
    mosaic, affine = params["mosaic"], params["random_affine"]
    saturation = params["random_adjust_saturation"]
    translation = affine["max_translation"]
    return [
        A.Mosaic(
            target_size=mosaic["output_size"],
            cell_shape=mosaic["output_size"],
            center_range=mosaic["center_range"],
            fit_mode="contain",
            fill=mosaic["fill_value"],
            p=1.0,
        ),
        A.HorizontalFlip(p=params["random_horizontal_flip"]["probability"]),
        A.Affine(
            scale=affine["scale_range"],
            keep_ratio=True,
            translate_percent=(-translation, translation),
            rotate=(-affine["max_rotation"], affine["max_rotation"]),
            shear=(-affine["max_shear"], affine["max_shear"]),
            border_mode=cv2.BORDER_CONSTANT,
            fill=affine["fill_value"],
            p=1.0,
        ),
        A.HueSaturationValue(
            hue_shift_limit=params["random_adjust_hue"]["max_delta"] * 180,
            sat_shift_limit=(saturation["max_delta"] - 1.0) * 127.5,
            val_shift_limit=params["random_adjust_brightness"]["max_delta"] * 255,
            p=1.0,
        ),
    ]


# Albumentations' ops for a recipe, built from the albumentations module and the recipe's steps.
ALBUMENTATIONS_RECIPES: dict[str, Callable[[Any, list], list]] = {"yolo": albumentations_yolo}
# Keras 3 preprocessing layers for a step, built from keras.layers and a bounding box format.
KERAS: dict[str, Callable[[Any, str], Any]] = {
    "random_horizontal_flip": lambda L, f: L.RandomFlip("horizontal", bounding_box_format=f),
    "random_vertical_flip": lambda L, f: L.RandomFlip("vertical", bounding_box_format=f),
    "random_rotation": lambda L, f: L.RandomRotation(10 / 360, bounding_box_format=f),
    "random_adjust_brightness": lambda L, f: L.RandomBrightness(
        0.2, value_range=(0, 255), bounding_box_format=f
    ),
    "random_adjust_contrast": lambda L, f: L.RandomContrast(
        0.2, value_range=(0, 255), bounding_box_format=f
    ),
    "random_adjust_hue": lambda L, f: L.RandomHue(
        0.04, value_range=(0, 255), bounding_box_format=f
    ),
    "random_adjust_saturation": lambda L, f: L.RandomSaturation(
        0.2, value_range=(0, 255), bounding_box_format=f
    ),
    "random_rgb_to_gray": lambda L, f: L.RandomGrayscale(1.0, bounding_box_format=f),
    "random_gaussian_blur": lambda L, f: L.RandomGaussianBlur(
        1.0, sigma=(0.1, 2.0), value_range=(0, 255), bounding_box_format=f
    ),
    "random_sharpness": lambda L, f: L.RandomSharpness(
        0.5, value_range=(0, 255), bounding_box_format=f
    ),
    "random_cutout": lambda L, f: L.RandomErasing(
        1.0, scale=(0.1, 0.3), value_range=(0, 255), bounding_box_format=f
    ),
}
# Boxes as the keras_layer step hands them over: normalized [ymin, xmin, ymax, xmax].
KERAS_BOX_FORMAT = "rel_yxyx"


def step_params(step: str) -> dict[str, Any]:
    """The parameters ``step`` runs with: probability 1 where it has one, then its
    registration's ``demo_params``, with ``PHOTO_SIZES`` for the photographs."""
    from object_input.ops import get_step

    spec = get_step(step)
    certain = {"probability": 1.0} if "probability" in spec.defaults else {}
    return {**certain, **spec.demo_params, **PHOTO_SIZES.get(step, {})}


def augments(steps: Sequence[str], recipe: str | None) -> dict[str, list]:
    """Each row's ``augment`` list: every step alone, the combined pipelines of the combining
    steps among ``steps``, the recipe."""
    rows = {step: [(step, step_params(step))] for step in steps}
    rows.update(
        (name, augment)
        for name, augment in COMBINED.items()
        if any(step in steps for step, _ in augment if step in COMBINING)
    )
    if recipe:
        rows[f"recipe {recipe}"] = recipe_steps(recipe)
    return rows


def recipe_steps(recipe: str) -> list:
    """The steps of ``object_input.recipes``' ``recipe``, at the pipeline's size where it
    takes an ``image_size``."""
    import inspect

    from object_input import recipes

    build = getattr(recipes, recipe, None)
    if not callable(build) or recipe.startswith("_"):
        known = [n for n in dir(recipes) if not n.startswith("_") and n.islower()]
        raise SystemExit(f"no recipe {recipe!r} in object_input.recipes (has: {known})")
    sized = "image_size" in inspect.signature(build).parameters
    return list(build(image_size=SIZE[0]) if sized else build())


def keras_augments(steps: Sequence[str]) -> dict[str, list]:
    """The Keras peer rows, ``keras:STEP``, for the steps that have one."""
    import keras

    return {
        f"keras:{step}": [keras_layer(keras.layers, KERAS_BOX_FORMAT)]
        for step, keras_layer in KERAS.items()
        if step in steps
    }


def object_input_timings(
    pattern: str, rows: dict[str, list], images: int, rounds: int
) -> tuple[dict[str, Any], dict[str, str]]:
    """Median timings of every row that builds and runs, and the error of each that does not."""
    import speed
    from common import interleaved_rounds, median_timings

    def start(augment: list) -> Callable:
        return speed.dataset_batches(
            lambda: speed.standard_dataset(pattern, 8, steps=(), augment=augment)
        )

    candidates, errors = {BASELINE: start([])}, {}
    for name, augment in rows.items():
        starter = start(augment)
        try:
            next(starter())  # also warms the tracing, as the timed builds are warm
        except Exception as error:  # a step this pipeline cannot run is reported, not fatal
            errors[name] = f"{type(error).__name__}: {str(error).splitlines()[0][:120]}"
            continue
        candidates[name] = starter
    return median_timings(interleaved_rounds(candidates, rounds, images)), errors


def decoded_photographs(pattern: str, count: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """The first ``count`` photographs decoded, and their boxes as [xmin, ymin, xmax, ymax]."""
    import tensorflow as tf

    import object_input as oi
    from object_input import fields

    images, boxes = [], []
    for record in tf.data.TFRecordDataset(sorted(tf.io.gfile.glob(pattern))).take(count):
        features = oi.decode_example(record)
        images.append(features[fields.IMAGE].numpy())
        boxes.append(features[fields.BOXES].numpy()[:, [1, 0, 3, 2]])
    return np.stack(images), boxes


def albumentations_timings(
    pattern: str, steps: Sequence[str], recipe: str | None, images: int, rounds: int
) -> dict[str, float] | str:
    """CPU ms per image of each Albumentations op + resize, of the recipe's ops + resize (the
    key ``recipe NAME``) and of NoOp + resize (the key ``BASELINE``), from a subprocess; or why
    there are none."""
    wanted = [step for step in steps if step in ALBUMENTATIONS]
    peer_recipe = recipe if recipe in ALBUMENTATIONS_RECIPES else None
    if not wanted and not peer_recipe:
        return "no step or recipe here has Albumentations ops"
    photos, boxes = decoded_photographs(pattern, min(images, 64))
    with tempfile.TemporaryDirectory() as folder:
        data = os.path.join(folder, "photos.npz")
        counts = [len(b) for b in boxes]
        np.savez(data, images=photos, boxes=np.concatenate(boxes), counts=np.array(counts))
        command = [sys.executable, __file__, "--albumentations-worker", data]
        command += ["--images", str(images), "--rounds", str(rounds)]
        command += ["--steps", ",".join(wanted)] if wanted else []
        command += ["--recipe", peer_recipe] if peer_recipe else []
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        return f"the Albumentations run failed: {done.stderr.strip().splitlines()[-1:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def albumentations_worker(
    data: str, steps: Sequence[str], recipe: str | None, images: int, rounds: int
) -> None:
    """Print, as JSON, the median CPU ms per image of each op + resize, of the recipe's ops +
    resize and of NoOp + resize."""
    import albumentations as A
    import cv2

    cv2.setNumThreads(1)
    loaded = np.load(data)
    photos = loaded["images"]
    boxes = np.split(loaded["boxes"], np.cumsum(loaded["counts"])[:-1])
    bbox_params = A.BboxParams(format="albumentations", label_fields=["labels"], clip=True)

    def pipeline(*ops: Any) -> Any:
        return A.Compose([*ops, A.Resize(*SIZE)], bbox_params=bbox_params, seed=1)

    def example(k: int) -> dict[str, Any]:
        return {"image": photos[k], "bboxes": boxes[k], "labels": [1] * len(boxes[k])}

    def with_partners(k: int) -> dict[str, Any]:
        """Photograph ``k`` and, as Mosaic's partners, the next three."""
        partners = [example((k + offset) % len(photos)) for offset in (1, 2, 3)]
        return {**example(k), "mosaic_metadata": partners}

    pipelines = {BASELINE: (pipeline(A.NoOp(p=1.0)), example)}
    pipelines.update({step: (pipeline(ALBUMENTATIONS[step](A)), example) for step in steps})
    if recipe:
        ops = ALBUMENTATIONS_RECIPES[recipe](A, recipe_steps(recipe))
        pipelines[f"recipe {recipe}"] = (pipeline(*ops), with_partners)
    runs: dict[str, list[float]] = {name: [] for name in pipelines}
    for _ in range(rounds):
        for name, (transform, inputs) in pipelines.items():
            began = time.process_time()
            for index in range(images):
                transform(**inputs(index % len(photos)))
            runs[name].append((time.process_time() - began) / images * 1000)
    print(json.dumps({name: statistics.median(ms) for name, ms in runs.items()}))


def report(
    rows: Sequence[str],
    timings: dict[str, Any],
    errors: dict[str, str],
    albumentations: dict[str, float] | str,
) -> None:
    """One markdown row per step or pipeline: added CPU ms per image, peers, images/s ratio."""
    base = timings[BASELINE]
    base_ms = base.cpu_s_per_image * 1000
    peers = albumentations if isinstance(albumentations, dict) else {}
    print(
        f"\nno steps: {base_ms:.2f} CPU ms per image, {base.images_per_s:.1f} images/s; "
        f"Albumentations NoOp + Resize: "
        + (f"{peers[BASELINE]:.2f} CPU ms per image" if peers else str(albumentations))
    )
    print(
        "\n| step | object_input added CPU ms/img | Albumentations added ms/img | ratio "
        "| Keras 3 added CPU ms/img | images/s × no steps |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name in rows:
        if name in errors:
            print(f"| `{name}` | not run: {errors[name]} | | | | |")
            continue
        added = timings[name].cpu_s_per_image * 1000 - base_ms
        peer = peers[name] - peers[BASELINE] if name in peers else None
        ratio = f"{added / peer:.2f}" if peer is not None and min(added, peer) > 0 else "–"
        keras_row = timings.get(f"keras:{name}")
        keras_added = (
            "–" if keras_row is None else f"{keras_row.cpu_s_per_image * 1000 - base_ms:+.2f}"
        )
        print(
            f"| `{name}` | {added:+.2f} | {'–' if peer is None else f'{peer:+.2f}'} | {ratio} "
            f"| {keras_added} | {timings[name].images_per_s / base.images_per_s:.2f} |"
        )
    for name, error in errors.items():
        if name.startswith("keras:"):
            print(f"({name} not run: {error})")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=lambda t: t.split(","), help="a subset of the steps")
    parser.add_argument("--images", type=int, default=256, help="images per candidate and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="64 images, one round")
    parser.add_argument("--recipe", help="a recipe of object_input.recipes, as a row of its own")
    parser.add_argument("--data", default="/tmp/oi-bench")
    parser.add_argument("--albumentations-worker", metavar="NPZ", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.images, args.rounds = 64, 1
    if args.albumentations_worker:
        albumentations_worker(
            args.albumentations_worker, args.steps or [], args.recipe, args.images, args.rounds
        )
        return

    from common import write_photo_records

    from object_input.ops import registered_steps

    began = time.perf_counter()
    steps = [s for s in registered_steps() if s not in NOT_ALONE]
    if args.steps:
        unknown = sorted(set(args.steps) - set(steps))
        if unknown:
            raise SystemExit(f"not registered (or not timed alone): {unknown}")
        steps = args.steps
    pattern = write_photo_records(args.data)
    rows = augments(steps, args.recipe)
    timings, errors = object_input_timings(
        pattern, {**rows, **keras_augments(steps)}, args.images, args.rounds
    )
    albumentations = albumentations_timings(pattern, steps, args.recipe, args.images, args.rounds)
    report(list(rows), timings, errors, albumentations)
    print(f"\n({args.images} images × {args.rounds} rounds, {time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
