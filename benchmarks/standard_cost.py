"""Where the standard pipeline's cost over "no steps" goes: pipeline rows, per-op and colour costs.

    python benchmarks/standard_cost.py pipeline [--images 320] [--rounds 3]  # steps one by one
    python benchmarks/standard_cost.py ops      [--calls 200]               # per op, per example
    python benchmarks/standard_cost.py colour   [--batches 40] [--rounds 3] # fused stage, 8×512²

``pipeline`` runs ``make_dataset`` side by side (alternating rounds) with no steps, the flip, the
crop, both, both plus the colour parameters (``color_stage="device"``: drawn and batched, not
applied) and the standard six steps, on each image set. ``ops`` times single ops on one decoded
record of the first set (CPU ms per call, in a ``tf.function``, median of 5 rounds); it also
prints the pixel difference of ``crop_and_resize`` (crop, flip and resize in one op) against the
pipeline's crop → flip → resize. ``colour`` times the fused colour stage and its two compiled
parts (the contrast means, the colour pass) in a ``tf.data`` map over one batch of 8 × 512 × 512,
and its ``uint8`` output (compiled cast) against TensorFlow's cast after a float32 stage.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from common import IMAGE_SETS, cpu_seconds, interleaved_streams, report_streams
from speed import STANDARD_STEPS, dataset_batches, standard_dataset

from object_input.ops import core, fused_color

COLOUR_STEPS = STANDARD_STEPS[2:]


def pipeline(args: argparse.Namespace) -> None:
    """The standard pipeline built up step by step, side by side."""
    for image_set in args.sets:
        pattern = IMAGE_SETS[image_set](args.data)
        rows = {
            "no steps": {"steps": ()},
            "flip": {"steps": STANDARD_STEPS[:1]},
            "crop": {"steps": STANDARD_STEPS[1:2]},
            "flip + crop": {"steps": STANDARD_STEPS[:2]},
            "flip + crop + colour parameters": {"color_stage": "device"},
            "standard": {},
            "standard, output_dtype='uint8'": {"output_dtype": "uint8"},
        }
        candidates = {
            name: dataset_batches(functools.partial(standard_dataset, pattern, 8, **options))
            for name, options in rows.items()
        }
        print(f"\n{image_set}: {args.images} images × {args.rounds} rounds")
        results = interleaved_streams(candidates, args.rounds, args.images)
        report_streams(results, "standard")
        base = results["no steps"].cpu_s_per_image
        for name in rows:
            extra = (results[name].cpu_s_per_image - base) * 1000
            print(f"  {name:34s} {extra:+5.2f} CPU ms/img over no steps")


def _median_ms(functions: dict[str, Callable[[], tf.Tensor]], calls: int) -> dict[str, float]:
    """CPU ms per call of each function, median of 5 rounds alternating the functions."""
    compiled = {name: tf.function(fn, autograph=False) for name, fn in functions.items()}
    for fn in compiled.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in compiled}
    for _ in range(5):
        for name, fn in compiled.items():
            began = cpu_seconds()
            for _ in range(calls):
                fn()
            times[name].append((cpu_seconds() - began) / calls * 1000)
    return {name: statistics.median(values) for name, values in times.items()}


def ops(args: argparse.Namespace) -> None:
    """Per-example op costs on one record, and crop_and_resize's pixel difference."""
    pattern = IMAGE_SETS[args.sets[0]](args.data)
    record = next(iter(tf.data.TFRecordDataset(tf.io.gfile.glob(pattern)[:1])))
    spec = {"image/encoded": tf.io.FixedLenFeature((), tf.string)}
    encoded = tf.io.parse_single_example(record, spec)["image/encoded"]
    image = tf.io.decode_jpeg(encoded, channels=3)
    height, width = image.shape[:2]
    # A window of about 55 % of the image, the standard crop's mean area.
    top, left, crop_height, crop_width = 40, 60, 360, 470
    crop = image[top : top + crop_height, left : left + crop_width]
    flipped = tf.reverse(crop, [1])
    box = [[top / height, (left + crop_width) / width, (top + crop_height) / height, left / width]]
    boxes = tf.constant([[[0.2, 0.2, 0.6, 0.6]]])
    functions = {
        "decode_jpeg, whole image": lambda: tf.io.decode_jpeg(encoded, channels=3),
        "decode_and_crop_jpeg, window + 16 px margin": lambda: tf.io.decode_and_crop_jpeg(
            encoded, [top - 16, left - 16, crop_height + 32, crop_width + 32], channels=3
        ),
        "stateless_sample_distorted_bounding_box": lambda: (
            tf.image.stateless_sample_distorted_bounding_box(
                [height, width, 3],
                boxes,
                seed=[1, 2],
                min_object_covered=1.0,
                aspect_ratio_range=(0.75, 1.33),
                area_range=(0.1, 1.0),
                max_attempts=100,
            )
        ),
        "flip: reverse the uint8 window": lambda: tf.reverse(crop, [1]),
        "flip: cast to float32, reverse": lambda: tf.reverse(tf.cast(crop, tf.float32), [1]),
        "cast the window to float32": lambda: tf.cast(crop, tf.float32),
        "resize window → 512², uint8 in": lambda: tf.image.resize(crop, [512, 512]),
        "resize window → 512², cast to float32 first": lambda: tf.image.resize(
            tf.cast(crop, tf.float32), [512, 512]
        ),
        "crop_and_resize (crop + flip + resize in one op)": lambda: tf.image.crop_and_resize(
            image[tf.newaxis], box, [0], [512, 512]
        ),
    }
    print(f"one {height}×{width} record of {args.sets[0]}; window {crop_height}×{crop_width}")
    for name, ms in _median_ms(functions, args.calls).items():
        print(f"  {name:48s} {ms:6.3f} CPU ms/call")
    today = tf.image.resize(flipped, [512, 512]).numpy()
    fused = tf.image.crop_and_resize(image[tf.newaxis], box, [0], [512, 512])[0].numpy()
    difference = np.abs(fused - today)
    print(
        "crop_and_resize vs crop → flip → resize, |difference| in levels of 255: "
        f"mean {difference.mean():.2f}, 99th percentile {np.percentile(difference, 99):.1f}, "
        f"max {difference.max():.1f}"
    )
    # The flip commutes with the resize up to float rounding of the sampling positions.
    rng = np.random.default_rng(0)
    differing, worst = [], 0.0
    for _ in range(20):
        size = [int(s) for s in rng.integers(64, 480, 2)]
        window = image[: size[0], : size[1]]
        before = tf.image.resize(tf.reverse(window, [1]), [512, 512])
        after = tf.reverse(tf.image.resize(window, [512, 512]), [1])
        difference = np.abs((after - before).numpy())
        differing.append(np.mean(difference > 0))
        worst = max(worst, float(difference.max()))
    print(
        f"flip after the resize vs before it, 20 random windows: max |difference| {worst:.4f} "
        f"levels; values differing: {np.mean(differing):.0%} (0 % in {differing.count(0.0)} "
        "windows)"
    )


def colour(args: argparse.Namespace) -> None:
    """The fused colour stage and its parts on one batch of 8 × 512 × 512, in a tf.data map."""
    rng = np.random.default_rng(0)
    images = tf.constant(rng.uniform(0, 255, (8, 512, 512, 3)).astype(np.float32))
    columns = [(-0.2, 0.2), (0.8, 1.25), (-0.02, 0.02), (0.8, 1.25)]
    parameters = tf.constant(
        np.stack([rng.uniform(low, high, 8) for low, high in columns], 1).astype(np.float32)
    )
    means = fused_color._channel_means(COLOUR_STEPS[:1], images, parameters, ())
    compile_ = functools.partial(tf.function, jit_compile=True)
    means_part = compile_(functools.partial(fused_color._channel_means, COLOUR_STEPS[:1]))
    colour_part = compile_(functools.partial(fused_color._colour, COLOUR_STEPS))
    stage = fused_color._compiled(COLOUR_STEPS)
    fused = fused_color.FusedColor.split(COLOUR_STEPS)[1]
    candidates = {
        "one pass: x + 0 (read and write the batch)": lambda x, p: x + 0.0,
        "fused colour stage": stage,
        "  its contrast means": lambda x, p: means_part(x, p, ()),
        "  its colour pass (means given)": lambda x, p: colour_part(x, p, (means,)),
        "fused colour stage, uint8 out": lambda x, p: fused(x, p, tf.uint8),
        "  the same, TensorFlow's cast after it": lambda x, p: core.like(fused(x, p), tf.uint8),
    }
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(args.rounds):
        for name, fn in candidates.items():
            dataset = tf.data.Dataset.from_tensors((images, parameters)).repeat(args.batches)
            dataset = dataset.map(fn, num_parallel_calls=tf.data.AUTOTUNE)
            began = cpu_seconds()
            for _ in dataset:
                pass
            times[name].append((cpu_seconds() - began) / (8 * args.batches) * 1000)
    for name, values in times.items():
        print(f"  {name:44s} {statistics.median(values):6.3f} CPU ms/img")


COMMANDS = {"pipeline": pipeline, "ops": ops, "colour": colour}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=sorted(COMMANDS))
    parser.add_argument("--images", type=int, default=320)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--data", default="/tmp/oi-bench")
    parser.add_argument("--sets", type=lambda text: text.split(","), default=list(IMAGE_SETS))
    args = parser.parse_args()
    os.makedirs(args.data, exist_ok=True)
    COMMANDS[args.command](args)


if __name__ == "__main__":
    main()
