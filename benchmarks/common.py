"""Shared benchmark helpers: generated data and interleaved timing rounds."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import resource
import statistics
import time
from collections.abc import Callable, Iterable, Iterator

import numpy as np
import tensorflow as tf

from object_input.writers import build_example, write_tfrecords
from object_input.writers.synthetic import make_example


def write_benchmark_records(
    directory: str,
    num_examples: int = 256,
    height: int = 480,
    width: int = 640,
    num_shards: int = 4,
    seed: int = 0,
) -> str:
    """JPEG records of ``height`` × ``width`` with 1–20 boxes; returns a glob for them."""
    pattern = os.path.join(directory, "bench-*.tfrecord")
    if tf.io.gfile.glob(pattern):
        return pattern
    rng = np.random.default_rng(seed)

    def examples() -> Iterable[tf.train.Example]:
        for index in range(num_examples):
            arrays = make_example(
                rng, height, width, max_objects=20, min_objects=1, image_format="jpeg", index=index
            )
            arrays.pop("masks")
            yield build_example(arrays.pop("image"), **arrays)

    write_tfrecords(examples(), os.path.join(directory, "bench"), num_shards)
    return pattern


# The colour photographs scikit-image ships in its package (no download), by loader name.
PHOTOGRAPHS = (
    "astronaut",
    "chelsea",
    "coffee",
    "hubble_deep_field",
    "immunohistochemistry",
    "retina",
    "rocket",
    "stereo_motorcycle",
)


def random_boxes(rng: np.random.Generator, min_boxes: int = 1, max_boxes: int = 20) -> np.ndarray:
    """1–20 normalized boxes, each 1/8 to 1/2 of the image's side, anywhere inside it."""
    count = int(rng.integers(min_boxes, max_boxes + 1))
    size = rng.uniform(1 / 8, 1 / 2, size=(count, 2))
    low = rng.uniform(0.0, 1.0, size=(count, 2)) * (1.0 - size)
    return np.concatenate([low, low + size], axis=1).astype(np.float32)


def photo_crops(
    count: int, height: int, width: int, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    """``count`` uint8 ``height`` × ``width`` crops of scikit-image's sample photographs, in
    turn: each scaled up by 1–1.5× its least cover scale (the smaller ones so that they cover
    the crop at all), cropped at a random place and mirrored half of the time. Needs the
    ``bench`` extra (scikit-image)."""
    import skimage.data

    photos = [getattr(skimage.data, name)() for name in PHOTOGRAPHS]
    photos = [p[0] if isinstance(p, tuple) else p for p in photos]
    for index in range(count):
        photo = photos[index % len(photos)][..., :3]
        cover = max(height / photo.shape[0], width / photo.shape[1])
        scale = cover * rng.uniform(1.0, 1.5)
        size = [
            max(round(photo.shape[0] * scale), height),
            max(round(photo.shape[1] * scale), width),
        ]
        scaled = tf.image.resize(photo, size, antialias=True).numpy()
        top = int(rng.integers(0, size[0] - height + 1))
        left = int(rng.integers(0, size[1] - width + 1))
        crop = scaled[top : top + height, left : left + width]
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        yield np.clip(np.round(crop), 0, 255).astype(np.uint8)


def write_photo_records(
    directory: str,
    num_examples: int = 256,
    height: int = 480,
    width: int = 640,
    num_shards: int = 4,
    seed: int = 0,
    quality: int = 90,
) -> str:
    """:func:`photo_crops` encoded as JPEG at ``quality`` in records, each with 1–20 random
    boxes. Returns a glob for the records."""
    pattern = os.path.join(directory, "photo-*.tfrecord")
    if tf.io.gfile.glob(pattern):
        return pattern
    rng = np.random.default_rng(seed)

    def examples() -> Iterable[tf.train.Example]:
        for index, image in enumerate(photo_crops(num_examples, height, width, rng)):
            boxes = random_boxes(rng)
            yield build_example(
                image,
                boxes=boxes,
                classes=[int(c) for c in rng.integers(1, 4, size=len(boxes))],
                image_format="jpeg",
                jpeg_quality=quality,
                filename=f"photo_{index:06d}.jpg",
                source_id=str(index),
            )

    write_tfrecords(examples(), os.path.join(directory, "photo"), num_shards)
    return pattern


IMAGE_SETS = {"noisy": write_benchmark_records, "photos": write_photo_records}


def cpu_seconds() -> float:
    """User + system CPU time of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclasses.dataclass(frozen=True)
class StreamTiming:
    """One pipeline run: build time, time to its first batch, then throughput and CPU cost.

    ``first_batch_cpu_s`` is the process's CPU time until the first batch: on a loaded machine
    the wall-clock times stretch with the share of the cores the process gets, this does not.
    """

    build_s: float
    first_batch_s: float
    images_per_s: float
    cpu_s_per_image: float
    first_batch_cpu_s: float


def time_stream(start: Callable[[], Iterator[int]], images: int) -> StreamTiming:
    """Time a fresh pipeline: ``start()`` builds it and returns an iterator of batch sizes.

    ``build_s`` is the call to ``start`` (construction, tracing, starting threads);
    ``first_batch_s`` runs from that call to the first batch. Throughput and CPU time are measured
    over the next ``images`` images only, so every round starts from an empty pipeline and no
    candidate runs in the background of another: the iterator is closed afterwards, and closing
    must stop the pipeline's threads.
    """
    began, began_cpu = time.perf_counter(), cpu_seconds()
    with contextlib.closing(start()) as batches:
        built = time.perf_counter() - began
        next(batches)
        first = time.perf_counter() - began
        first_cpu = cpu_seconds() - began_cpu
        wall, cpu = time.perf_counter(), cpu_seconds()
        seen = 0
        for size in batches:
            seen += size
            if seen >= images:
                break
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    return StreamTiming(built, first, seen / wall, cpu / seen, first_cpu)


def interleaved_rounds(
    candidates: dict[str, Callable[[], Iterator[int]]], rounds: int, images: int
) -> dict[str, list[StreamTiming]]:
    """:func:`time_stream` of every candidate in each of ``rounds`` rounds, alternating them."""
    runs: dict[str, list[StreamTiming]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, start in candidates.items():
            runs[name].append(time_stream(start, images))
    return runs


def median_timings(runs: dict[str, list[StreamTiming]]) -> dict[str, StreamTiming]:
    """Per-field medians of each candidate's rounds."""
    return {
        name: StreamTiming(
            *(
                statistics.median(getattr(t, f.name) for t in timings)
                for f in dataclasses.fields(StreamTiming)
            )
        )
        for name, timings in runs.items()
    }


def interleaved_streams(
    candidates: dict[str, Callable[[], Iterator[int]]], rounds: int, images: int
) -> dict[str, StreamTiming]:
    """Per-field medians of :func:`time_stream` over ``rounds`` rounds alternating candidates."""
    return median_timings(interleaved_rounds(candidates, rounds, images))


def report_streams(results: dict[str, StreamTiming], baseline: str) -> None:
    """Print images/s, their ratio to ``baseline``'s, CPU ms per image, build and first-batch s
    (wall), and the CPU seconds until the first batch."""
    base = results[baseline].images_per_s
    print(
        f"{'pipeline':40s} {'images/s':>9s} {'ratio':>6s} {'CPU ms/img':>11s} {'build s':>8s} "
        f"{'1st batch s':>12s} {'1st batch CPU s':>16s}"
    )
    for name, t in results.items():
        print(
            f"{name:40s} {t.images_per_s:9.1f} {t.images_per_s / base:6.2f} "
            f"{t.cpu_s_per_image * 1000:11.2f} {t.build_s:8.2f} {t.first_batch_s:12.2f} "
            f"{t.first_batch_cpu_s:16.2f}"
        )
    print(f"(ratio: images/s over that of {baseline!r})")


def rss_mib() -> float:
    """Resident set size of this process now (VmRSS from /proc/self/status), in MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS line in /proc/self/status (Linux only)")
