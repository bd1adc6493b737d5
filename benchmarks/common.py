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

from object_input.synthetic import make_example
from object_input.writers import build_example, write_tfrecords


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


def cpu_seconds() -> float:
    """User + system CPU time of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclasses.dataclass(frozen=True)
class StreamTiming:
    """One pipeline run: build time, time to its first batch, then throughput and CPU cost."""

    build_s: float
    first_batch_s: float
    images_per_s: float
    cpu_s_per_image: float


def time_stream(start: Callable[[], Iterator[int]], images: int) -> StreamTiming:
    """Time a fresh pipeline: ``start()`` builds it and returns an iterator of batch sizes.

    ``build_s`` is the call to ``start`` (construction, tracing, starting threads);
    ``first_batch_s`` runs from that call to the first batch. Throughput and CPU time are measured
    over the next ``images`` images only, so every round starts from an empty pipeline and no
    candidate runs in the background of another: the iterator is closed afterwards, and closing
    must stop the pipeline's threads.
    """
    began = time.perf_counter()
    with contextlib.closing(start()) as batches:
        built = time.perf_counter() - began
        next(batches)
        first = time.perf_counter() - began
        wall, cpu = time.perf_counter(), cpu_seconds()
        seen = 0
        for size in batches:
            seen += size
            if seen >= images:
                break
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    return StreamTiming(built, first, seen / wall, cpu / seen)


def interleaved_streams(
    candidates: dict[str, Callable[[], Iterator[int]]], rounds: int, images: int
) -> dict[str, StreamTiming]:
    """Per-field medians of :func:`time_stream` over ``rounds`` rounds alternating candidates."""
    runs: dict[str, list[StreamTiming]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, start in candidates.items():
            runs[name].append(time_stream(start, images))
    return {
        name: StreamTiming(
            *(
                statistics.median(getattr(t, f.name) for t in timings)
                for f in dataclasses.fields(StreamTiming)
            )
        )
        for name, timings in runs.items()
    }


def report_streams(results: dict[str, StreamTiming], baseline: str) -> None:
    """Print images/s, their ratio to ``baseline``'s, CPU ms per image, build and first-batch s."""
    base = results[baseline].images_per_s
    print(
        f"{'pipeline':40s} {'images/s':>9s} {'ratio':>6s} {'CPU ms/img':>11s} {'build s':>8s} "
        f"{'1st batch s':>12s}"
    )
    for name, t in results.items():
        print(
            f"{name:40s} {t.images_per_s:9.1f} {t.images_per_s / base:6.2f} "
            f"{t.cpu_s_per_image * 1000:11.2f} {t.build_s:8.2f} {t.first_batch_s:12.2f}"
        )
    print(f"(ratio: images/s over that of {baseline!r})")


def rss_mib() -> float:
    """Resident set size of this process now (VmRSS from /proc/self/status), in MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS line in /proc/self/status (Linux only)")
