"""Speed of the standard augmentation pipeline against the floor and its peers, side by side.

    python benchmarks/speed.py compare  [--images 640] [--rounds 5]  # every pipeline, both sets
    python benchmarks/speed.py cold     [--pipeline standard]       # first batch, fresh process
    python benchmarks/speed.py scaling  [--images 480] [--rounds 5]  # num_parallel_calls 1, 2, auto
    python benchmarks/speed.py ablation [--images 320] [--rounds 3]  # minus one step; step costs
    python benchmarks/speed.py rss      [--images 20000] [--shuffle-buffer 1000] [--every 50]
    python benchmarks/speed.py tuned    [--images 960] [--rounds 10] # variables vs constants

Data (``--data``, default /tmp/oi-bench; ``--sets``): "noisy", generated 640×480 JPEGs of shapes on
noise with 1–20 boxes, and "photos", random 640×480 crops of scikit-image's sample photographs as
JPEG q90 with 1–20 random boxes (needs the ``bench`` extra). Batches of 8 at 512×512.

- floor: plain ``tf.data``: read, parse the detection schema (boxes and classes too), decode,
  resize, padded batch, prefetch; the same shuffle buffer as ``make_dataset``; no augmentation.
- make_dataset, no steps: the same work through ``object_input.make_dataset``.
- standard: ``make_dataset`` with flip, crop, brightness, contrast, hue, saturation (every step
  with its defaults; the colour steps on the batch after the resize, by default), and the same
  with ``trailing_steps="exact"``.
- verified data: no steps and standard again on the same files verified first (``object-input
  inspect --verify``, run here): read and decoded without the per-record checks and their catch.
  Every other ``make_dataset`` row checks every record (``trust_manifest=False``).
- OD API ``preprocess()`` style: the six steps per example on float images, one ``tf.image`` op
  each, clipped to [0, 255] after each, under ``tf.data`` (written here, not vendored).
- Keras 3 layers: ``RandomFlip``, ``RandomColorJitter`` and ``Resizing`` with
  ``bounding_box_format``, per example, under ``tf.data`` (no crop: Keras has none that keeps
  boxes).
- queue runners: the same six steps as a TF1 user wrote them (``benchmarks/queue_runners.py``).

Every round builds each pipeline afresh and tears it down before the next candidate runs, so no
pipeline fills its buffers in the background of another; rounds alternate between candidates and
medians are reported. The machine may be shared: compare the ratios, not the absolute rates.
"""

from __future__ import annotations

import argparse
import gc
import glob
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from operator import attrgetter
from unittest import mock

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import queue_runners
import tensorflow as tf
from common import (
    IMAGE_SETS,
    StreamTiming,
    cpu_seconds,
    interleaved_rounds,
    interleaved_streams,
    median_timings,
    report_streams,
    rss_mib,
    time_stream,
)

import object_input as oi
from object_input import fields
from object_input.tracing import stage_files

AUTOTUNE = tf.data.AUTOTUNE
SIZE = (512, 512)
MAX_BOXES = 100
STANDARD_STEPS = (
    "random_horizontal_flip",
    "random_crop_image",
    "random_adjust_brightness",
    "random_adjust_contrast",
    "random_adjust_hue",
    "random_adjust_saturation",
)
# Every record checked, as on data never verified: the benchmark's files may have a manifest.
CHECKED = oi.DecodeOptions(trust_manifest=False)
# make_dataset's default shuffle buffer, so that both pipelines shuffle alike.
FLOOR_SHUFFLE_BUFFER = 2048

_BOX_KEYS = tuple(f"image/object/bbox/{c}" for c in ("ymin", "xmin", "ymax", "xmax"))


def floor_records(files: Sequence[str]) -> tf.data.Dataset:
    """The serialized records as every plain ``tf.data`` pipeline here reads them: the files
    interleaved, shuffled as ``make_dataset`` shuffles by default, repeated."""
    records = tf.data.TFRecordDataset(files, num_parallel_reads=len(files))
    return records.shuffle(FLOOR_SHUFFLE_BUFFER, seed=1).repeat()


def floor_dataset(files: Sequence[str], batch_size: int) -> tf.data.Dataset:
    """The least a detection pipeline does, in plain ``tf.data``; no augmentation."""
    string = tf.io.FixedLenFeature((), tf.string, default_value="")
    spec = {
        "image/encoded": string,
        "image/format": string,
        "image/filename": string,
        "image/source_id": string,
        "image/height": tf.io.FixedLenFeature((), tf.int64, default_value=0),
        "image/width": tf.io.FixedLenFeature((), tf.int64, default_value=0),
        "image/object/class/label": tf.io.VarLenFeature(tf.int64),
        **{key: tf.io.VarLenFeature(tf.float32) for key in _BOX_KEYS},
    }

    def decode(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_single_example(serialized, spec)
        image = tf.io.decode_jpeg(parsed["image/encoded"], channels=3)
        boxes = tf.stack([tf.sparse.to_dense(parsed[key]) for key in _BOX_KEYS], axis=1)
        classes = tf.sparse.to_dense(parsed["image/object/class/label"])
        return {
            fields.IMAGE: tf.image.resize(image, SIZE),
            fields.BOXES: boxes,
            fields.CLASSES: tf.cast(classes, tf.int32),
            fields.NUM_BOXES: tf.shape(boxes)[0],
            fields.SOURCE_ID: parsed["image/source_id"],
        }

    dataset = floor_records(files).map(decode, num_parallel_calls=AUTOTUNE)
    return dataset.padded_batch(batch_size).prefetch(AUTOTUNE)


def standard_dataset(
    pattern: str, batch_size: int, steps: Sequence[str] = STANDARD_STEPS, **options
) -> tf.data.Dataset:
    """``make_dataset`` as the benchmark configures it; ``options`` override its keywords."""
    keywords = {
        "batch_size": batch_size,
        "image_size": SIZE,
        "max_boxes": MAX_BOXES,
        "seed": 1,
        "num_epochs": None,
        "augment": list(steps),
        "decoding": CHECKED,
    }
    return oi.make_dataset(pattern, **{**keywords, **options})


def dataset_batches(make: Callable[[], tf.data.Dataset]) -> Callable[[], Iterator[int]]:
    """A starter for :func:`common.time_stream`: builds the dataset and its iterator."""

    def start() -> Iterator[int]:
        # A generator expression creates the dataset's iterator at once, so the build is timed.
        return (int(batch[fields.IMAGE].shape[0]) for batch in make())

    return start


def check_target(label: str, ratio: float, target: float, spread: Sequence[float]) -> None:
    """Print a ratio against its target, with its range over the rounds (``spread``)."""
    verdict = "met" if ratio >= target else "NOT met"
    print(
        f"{label}: {ratio:.2f}, rounds {min(spread):.2f}–{max(spread):.2f} "
        f"(target ≥ {target:g}: {verdict})"
    )


def round_ratios(
    tops: Sequence[StreamTiming], bottoms: Sequence[StreamTiming], value: Callable
) -> list[float]:
    """``value(top) / value(bottom)`` within each round."""
    return [value(top) / value(bottom) for top, bottom in zip(tops, bottoms, strict=True)]


def od_api_dataset(files: Sequence[str], batch_size: int) -> tf.data.Dataset:
    """The six steps as the Object Detection API's ``preprocess()`` runs them, under ``tf.data``.

    Written here, not vendored: parse and decode per example, one float32 image per example, then
    one ``tf.image`` op per step, each scaling to [0, 1], applying the op, clipping and scaling
    back to [0, 255] (the step functions of ``queue_runners.py``), then a bilinear resize;
    padded batches, prefetch. Stateful random ops, as the API uses.
    """
    decoded = _parsed_records(files)

    def preprocess(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        example = queue_runners.augment(example)
        image = tf.image.resize(example["image"], SIZE)
        return {**example, "image": image, "num_boxes": tf.shape(example["boxes"])[0]}

    dataset = decoded.map(preprocess, num_parallel_calls=AUTOTUNE)
    return dataset.padded_batch(batch_size).prefetch(AUTOTUNE)


# Keras's saturation factor f scales saturation by f / (1 - f): (4/9, 5/9) is 0.8 to 1.25.
KERAS_SATURATION = (4 / 9, 5 / 9)


def keras_dataset(files: Sequence[str], batch_size: int) -> tf.data.Dataset:
    """Flip, colour jitter and resize as Keras 3 preprocessing layers, per example, under tf.data.

    ``RandomFlip("horizontal")``, ``RandomColorJitter`` (brightness ±0.2 of the range, contrast
    ±0.2, saturation 0.8–1.25, hue ±0.02) and ``Resizing`` to 512×512, all with
    ``bounding_box_format="rel_yxyx"`` so that boxes follow the image. Keras has no random crop
    that keeps the boxes, so this pipeline has no crop: its colour steps see the whole image.
    """
    import keras

    box_format = {"bounding_box_format": "rel_yxyx"}
    layers = [
        keras.layers.RandomFlip("horizontal", seed=1, **box_format),
        keras.layers.RandomColorJitter(
            value_range=(0, 255),
            brightness_factor=0.2,
            contrast_factor=0.2,
            saturation_factor=KERAS_SATURATION,
            hue_factor=0.02,
            seed=1,
            **box_format,
        ),
        keras.layers.Resizing(*SIZE, **box_format),
    ]

    def augment(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        data = {
            "images": example["image"],
            "bounding_boxes": {"boxes": example["boxes"], "labels": example["classes"]},
        }
        for layer in layers:
            data = layer(data)
        boxes = data["bounding_boxes"]["boxes"]
        return {
            fields.IMAGE: data["images"],
            fields.BOXES: boxes,
            fields.CLASSES: data["bounding_boxes"]["labels"],
            fields.NUM_BOXES: tf.shape(boxes)[0],
        }

    dataset = _parsed_records(files).map(augment, num_parallel_calls=AUTOTUNE)
    return dataset.padded_batch(batch_size).prefetch(AUTOTUNE)


def _parsed_records(files: Sequence[str]) -> tf.data.Dataset:
    """Shuffled, repeated records parsed and decoded to float32 images, as the peers start."""
    return floor_records(files).map(queue_runners.parse_example, num_parallel_calls=AUTOTUNE)


def verify(pattern: str) -> None:
    """``object-input inspect --verify`` on the files of ``pattern``, in a process of its own:
    this one stays cold for ``cold``."""
    command = [sys.executable, "-m", "object_input.cli", "inspect", "--verify", pattern]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def pipelines(
    args: argparse.Namespace, pattern: str, files: list[str]
) -> dict[str, Callable[[], Iterator[int]]]:
    """Starters of the compared pipelines, by short name; the files are verified first."""
    verify(pattern)
    trusted = oi.DecodeOptions()
    return {
        "floor": dataset_batches(lambda: floor_dataset(files, args.batch_size)),
        "no_steps": dataset_batches(lambda: standard_dataset(pattern, args.batch_size, steps=())),
        "standard": dataset_batches(lambda: standard_dataset(pattern, args.batch_size)),
        "no_steps_trusted": dataset_batches(
            lambda: standard_dataset(pattern, args.batch_size, steps=(), decoding=trusted)
        ),
        "standard_trusted": dataset_batches(
            lambda: standard_dataset(pattern, args.batch_size, decoding=trusted)
        ),
        "standard_exact": dataset_batches(
            lambda: standard_dataset(pattern, args.batch_size, trailing_steps="exact")
        ),
        "od_api": dataset_batches(lambda: od_api_dataset(files, args.batch_size)),
        "keras": dataset_batches(lambda: keras_dataset(files, args.batch_size)),
        "queues": lambda: queue_runners.QueueRunnerPipeline(
            files, batch_size=args.batch_size, num_threads=args.queue_threads
        ),
    }


LABELS = {
    "floor": "floor (tf.data, no augmentation)",
    "no_steps": "make_dataset, no steps",
    "standard": "standard (make_dataset, 6 steps)",
    "no_steps_trusted": "make_dataset, no steps, verified data",
    "standard_trusted": "standard, verified data",
    "standard_exact": "standard, trailing_steps='exact'",
    "od_api": "OD API preprocess() style (tf.data)",
    "keras": "Keras 3 layers (flip, jitter, resize)",
    "queues": "queue runners (TF1, 6 steps)",
}
# Targets: (numerator, denominator, at least), ratios of images/s.
TARGETS = (
    ("standard", "floor", 0.75),
    ("no_steps", "floor", 0.97),
    ("standard", "od_api", 2.0),
    ("standard", "keras", 3.0),
)
TARGET_FIRST_BATCH_S = 0.35
# Verified data against the same pipeline checking every record: (verified, checked).
VERIFIED = (("no_steps_trusted", "no_steps"), ("standard_trusted", "standard"))


def compare(args: argparse.Namespace, pattern: str, files: list[str]) -> None:
    """Every pipeline side by side on each image set of ``--sets``; checks the targets."""
    for image_set in args.sets:
        pattern = IMAGE_SETS[image_set](args.data)
        files = sorted(tf.io.gfile.glob(pattern))
        starters = pipelines(args, pattern, files)
        print(f"\n{image_set}: {len(files)} files, {args.images} images × {args.rounds} rounds")
        runs = interleaved_rounds(
            {LABELS[name]: start for name, start in starters.items()}, args.rounds, args.images
        )
        results = median_timings(runs)
        report_streams(results, LABELS["floor"])
        by_name = {name: results[LABELS[name]] for name in starters}
        rounds = {name: runs[LABELS[name]] for name in starters}
        # A ratio of medians, and the same ratio within each round: on a noisy machine the
        # rounds' range says how far one run can be read.
        for top, bottom, target in TARGETS:
            ratio = by_name[top].images_per_s / by_name[bottom].images_per_s
            spread = round_ratios(rounds[top], rounds[bottom], attrgetter("images_per_s"))
            check_target(f"{top} / {bottom}", ratio, target, spread)
        first = by_name["standard"].first_batch_s
        verdict = "met" if first <= TARGET_FIRST_BATCH_S else "NOT met"
        print(
            f"standard time to first batch, warm: {first:.2f} s, "
            f"{by_name['standard'].first_batch_cpu_s:.2f} CPU s "
            f"(target ≤ {TARGET_FIRST_BATCH_S:g} s: {verdict})"
        )
        # On a loaded machine a pipeline's images/s follow its share of the cores; the inverse
        # ratio of CPU time per image is what the same ratio would be on idle, saturated cores.
        for top, bottom in VERIFIED:
            saved = by_name[bottom].cpu_s_per_image - by_name[top].cpu_s_per_image
            print(f"CPU ms per image saved by verified data, {bottom}: {saved * 1000:.2f}")
        for top, bottom, _ in TARGETS:
            ratio = by_name[bottom].cpu_s_per_image / by_name[top].cpu_s_per_image
            spread = round_ratios(rounds[bottom], rounds[top], attrgetter("cpu_s_per_image"))
            print(
                f"CPU per image, {bottom} / {top}: {ratio:.2f}, "
                f"rounds {min(spread):.2f}–{max(spread):.2f}"
            )


def cold(args: argparse.Namespace, pattern: str, files: list[str]) -> None:
    """Build and first-batch time of one pipeline as the first one built in a fresh process,
    with the stage functions an earlier process kept on disk (``$OBJECT_INPUT_CACHE``; run it
    twice on an empty folder to see both) or without."""
    folder = stage_files.directory()
    kept = len(glob.glob(os.path.join(folder, "*.stage"))) if folder else 0
    if args.collect_first:
        gc.collect()
    timing = time_stream(pipelines(args, pattern, files)[args.pipeline], args.images)
    print(
        f"{LABELS[args.pipeline]}: built in {timing.build_s:.2f} s, "
        f"first batch after {timing.first_batch_s:.2f} s "
        f"({kept} stage functions kept on disk in {folder} before)"
    )


def tuned(args: argparse.Namespace, pattern: str, files: list[str]) -> None:
    """The standard pipeline as ``make_dataset`` builds it, its tunable parameters variables,
    against the same steps with them as constants (what the per-example map pays to read them)."""
    del files

    def constants() -> Iterator[int]:
        with mock.patch.object(oi.ops.Augmentation, "tuned", lambda self: self):
            return dataset_batches(lambda: standard_dataset(pattern, args.batch_size))()

    candidates = {
        "standard, tunable parameters as variables": dataset_batches(
            lambda: standard_dataset(pattern, args.batch_size)
        ),
        "standard, as constants": constants,
    }
    # Each round in the other order, so that neither candidate always runs after the other.
    runs: dict[str, list[StreamTiming]] = {name: [] for name in candidates}
    for number in range(args.rounds):
        for name in sorted(candidates, reverse=number % 2 == 1):
            runs[name].append(time_stream(candidates[name], args.images))
    for name, timings in runs.items():
        rounds = " ".join(f"{timing.cpu_s_per_image * 1000:.2f}" for timing in timings)
        print(f"{name}: CPU ms per image by round {rounds}")
    report_streams(median_timings(runs), "standard, as constants")


def scaling(args: argparse.Namespace, pattern: str, files: list[str]) -> None:
    """The standard pipeline with num_parallel_calls 1, 2 and AUTOTUNE."""
    candidates = {
        f"standard, num_parallel_calls={name}": dataset_batches(
            lambda calls=calls: standard_dataset(pattern, args.batch_size, num_parallel_calls=calls)
        )
        for name, calls in (("1", 1), ("2", 2), ("AUTOTUNE", AUTOTUNE))
    }
    results = interleaved_streams(candidates, args.rounds, args.images)
    report_streams(results, "standard, num_parallel_calls=1")


def ablation(args: argparse.Namespace, pattern: str, files: list[str]) -> None:
    """Where the standard pipeline's time goes: no steps, other options, one step removed."""
    candidates: dict[str, Callable[[], Iterator[int]]] = {
        LABELS["floor"]: pipelines(args, pattern, files)["floor"],
        "make_dataset, no steps": dataset_batches(
            lambda: standard_dataset(pattern, args.batch_size, steps=())
        ),
        "standard (6 steps)": dataset_batches(lambda: standard_dataset(pattern, args.batch_size)),
        "standard, defer_decode=False": dataset_batches(
            lambda: standard_dataset(
                pattern,
                args.batch_size,
                decoding=oi.DecodeOptions(defer_decode=False, trust_manifest=False),
            )
        ),
    }
    for removed in STANDARD_STEPS:
        steps = [step for step in STANDARD_STEPS if step != removed]
        candidates[f"standard without {removed}"] = dataset_batches(
            lambda steps=steps: standard_dataset(pattern, args.batch_size, steps=steps)
        )
    results = interleaved_streams(candidates, args.rounds, args.images)
    report_streams(results, "standard (6 steps)")
    standard = results["standard (6 steps)"].cpu_s_per_image
    print(
        "\nCPU ms per image saved by removing one step (standard minus variant). Without the "
        "crop, the whole image is decoded and coloured, so that saving is negative:"
    )
    for removed in STANDARD_STEPS:
        variant = results[f"standard without {removed}"].cpu_s_per_image
        print(f"  {removed:28s} {(standard - variant) * 1000:7.2f}")
    step_costs(files)


def step_costs(files: list[str], repeats: int = 100) -> None:
    """CPU milliseconds per call of each step on one decoded 480×640 example, ours and TF1's.

    Each step runs alone in a ``tf.function`` on the same example, its image cast to float32 as
    the pipeline's steps after the first see it, with a fresh seed every call. CPU time is
    measured, not wall time, so that other load on the machine matters less. The grouped rows
    run steps through :class:`object_input.ops.Augmentation`, as ``make_dataset`` does.
    """
    decoder = oi.ExampleDecoder()
    record = next(iter(tf.data.TFRecordDataset(files[:1])))
    example = decoder(record)
    example = {**example, fields.IMAGE: tf.cast(example[fields.IMAGE], tf.float32)}
    image, boxes, classes = example[fields.IMAGE], example[fields.BOXES], example[fields.CLASSES]
    tf1_example = {"image": image, "boxes": boxes, "classes": classes}
    color_steps = STANDARD_STEPS[2:]
    color = oi.ops.Augmentation(color_steps)
    standard = oi.ops.Augmentation(STANDARD_STEPS)

    def tf1_color() -> tf.Tensor:
        out = image
        for name in color_steps:
            out = getattr(queue_runners, name)(out)
        return out

    rows: list[tuple[str, Callable[[tf.Tensor], object], Callable[[], object] | None]] = [
        (
            "decode (TF1: + cast to float)",
            lambda seed: decoder(record),
            lambda: queue_runners.parse_example(record),
        ),
        (
            "random_horizontal_flip",
            lambda seed: oi.ops.random_horizontal_flip(example, seed=seed),
            lambda: queue_runners.random_horizontal_flip(image, boxes),
        ),
        (
            "random_crop_image",
            lambda seed: oi.ops.random_crop_image(example, seed=seed),
            lambda: queue_runners.random_crop_image(image, boxes, classes),
        ),
    ]
    for name in color_steps:
        rows.append(
            (
                name,
                lambda seed, name=name: oi.ops.get_step(name).fn(example, seed=seed),
                lambda name=name: getattr(queue_runners, name)(image),
            )
        )
    rows += [
        ("4 colour steps (Augmentation)", lambda seed: color(example, seed), tf1_color),
        (
            "all 6 steps (Augmentation)",
            lambda seed: standard(example, seed),
            lambda: queue_runners.augment(tf1_example),
        ),
        ("resize 480×640 → 512×512", lambda seed: tf.image.resize(image, SIZE), None),
    ]

    def per_call_ms(fn: Callable[[tf.Tensor], object]) -> float:
        compiled = tf.function(fn)
        seeds = [tf.constant([i, 7], tf.int32) for i in range(repeats + 1)]
        tf.nest.map_structure(lambda t: t.numpy(), compiled(seeds[0]))
        began = cpu_seconds()
        for seed in seeds[1:]:
            tf.nest.map_structure(lambda t: t.numpy(), compiled(seed))
        return (cpu_seconds() - began) / repeats * 1000

    print(f"\nCPU ms per call on one 480×640 example ({repeats} calls each, tf.function):")
    print(f"  {'step':30s} {'object_input':>13s} {'TF1 style':>10s}")
    for name, mine, theirs in rows:
        other = f"{per_call_ms(lambda seed, fn=theirs: fn()):10.2f}" if theirs else ""
        print(f"  {name:30s} {per_call_ms(mine):13.2f} {other}".rstrip())


def rss(args: argparse.Namespace, pattern: str, files: list[str]) -> None:
    """RSS of the standard pipeline over ``--images`` images with a small shuffle buffer.

    Judged flat when the least-squares trend over the second half of the run (after the shuffle
    buffer and the autotuned buffers have filled) adds under 5 % of the mid-run RSS over that half.
    """
    dataset = standard_dataset(pattern, args.batch_size, shuffle_buffer_size=args.shuffle_buffer)
    samples: list[tuple[int, float]] = []
    seen = 0
    began = time.perf_counter()
    for index, batch in enumerate(dataset):
        seen += int(batch[fields.IMAGE].shape[0])
        done = seen >= args.images
        if index % args.every == 0 or done:
            samples.append((seen, rss_mib()))
        if done:
            break
    elapsed = time.perf_counter() - began
    print(f"{seen} images in {elapsed:.0f} s ({seen / elapsed:.1f} images/s)")
    print(f"{'images':>8s} {'RSS MiB':>9s}")
    for count, value in samples:
        print(f"{count:8d} {value:9.1f}")
    start, mid, end = samples[0], samples[len(samples) // 2], samples[-1]
    peak = max(value for _, value in samples)
    half = np.array(samples[len(samples) // 2 :])
    slope = np.polyfit(half[:, 0], half[:, 1], 1)[0]
    drift = slope * (end[0] - mid[0])
    print(
        f"start {start[1]:.0f} MiB (after {start[0]} images), mid {mid[1]:.0f} MiB "
        f"(after {mid[0]}), end {end[1]:.0f} MiB (after {end[0]}), peak {peak:.0f} MiB"
    )
    verdict = "flat" if abs(drift) < 0.05 * mid[1] else "NOT flat"
    print(
        f"trend over the second half: {slope * 1000:+.2f} MiB per 1000 images, "
        f"{drift:+.0f} MiB over the half ({drift / mid[1]:+.1%} of mid): {verdict}"
    )


COMMANDS = {
    "compare": compare,
    "cold": cold,
    "tuned": tuned,
    "scaling": scaling,
    "ablation": ablation,
    "rss": rss,
}
DEFAULT_IMAGES = {
    "compare": 640,
    "cold": 8,
    "scaling": 480,
    "ablation": 320,
    "rss": 20000,
    "tuned": 960,
}
DEFAULT_ROUNDS = {"compare": 5, "cold": 1, "scaling": 5, "ablation": 3, "rss": 1, "tuned": 10}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=sorted(COMMANDS))
    parser.add_argument("--images", type=int, help="images timed per candidate and round")
    parser.add_argument("--rounds", type=int, help="alternating rounds (median reported)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--queue-threads", type=int, default=2, help="train.batch num_threads")
    parser.add_argument(
        "--pipeline", choices=sorted(LABELS), default="standard", help="cold: which"
    )
    parser.add_argument(
        "--collect-first",
        action="store_true",
        help="cold: run the full garbage collection that TensorFlow's import leaves due "
        "before timing (any code after the import pays it)",
    )
    parser.add_argument("--shuffle-buffer", type=int, default=1000, help="rss: shuffle buffer")
    parser.add_argument("--every", type=int, default=50, help="rss: sample every N batches")
    parser.add_argument("--data", default="/tmp/oi-bench")
    parser.add_argument(
        "--sets",
        type=lambda text: text.split(","),
        default=list(IMAGE_SETS),
        help=f"image sets, comma-separated, from {sorted(IMAGE_SETS)} (compare: each in turn; "
        "the other commands: the first)",
    )
    args = parser.parse_args()
    args.images = args.images or DEFAULT_IMAGES[args.command]
    args.rounds = args.rounds or DEFAULT_ROUNDS[args.command]
    os.makedirs(args.data, exist_ok=True)
    pattern = IMAGE_SETS[args.sets[0]](args.data)
    files = sorted(tf.io.gfile.glob(pattern))
    print(f"{args.command}: {args.images} images × {args.rounds} rounds")
    began = time.perf_counter()
    COMMANDS[args.command](args, pattern, files)
    print(f"({time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
