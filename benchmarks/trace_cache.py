"""The trace cache (``object_input.tracing.trace_cache``) on the standard pipeline, in one
process: the CPU of consecutive builds, and the CPU per image traced in place against built on
kept traces, alternating.

    python benchmarks/trace_cache.py [--rounds 4] [--batches 60] [--series 3]

A pipeline seen once is traced in place; the second build traces what it keeps on its own
and imports it; from the third on, its decoder, steps and per-example function are imported
from the kept traces. Per image, both must cost the same.
"""

from __future__ import annotations

import argparse
import os
import statistics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import speed
import tensorflow as tf
from common import IMAGE_SETS, cpu_seconds

from object_input.tracing import trace_cache


def in_place(pattern: str) -> tf.data.Dataset:
    """The standard pipeline, every function traced where it is used."""
    trace_cache.clear()
    return speed.standard_dataset(pattern, 8)


def on_kept_traces(pattern: str) -> tf.data.Dataset:
    """The standard pipeline built a third time: on the traces the second build kept."""
    trace_cache.clear()
    for _ in range(2):
        speed.standard_dataset(pattern, 8)
    return speed.standard_dataset(pattern, 8)


def build_seconds(pattern: str, builds: int, keep: bool) -> list[float]:
    """CPU seconds of ``builds`` consecutive builds from an empty cache; with ``keep`` false the
    cache is emptied before each, as if there were none."""
    trace_cache.clear()
    seconds = []
    for _ in range(builds):
        if not keep:
            trace_cache.clear()
        began = cpu_seconds()
        speed.standard_dataset(pattern, 8)
        seconds.append(cpu_seconds() - began)
    return seconds


def cpu_ms_per_image(dataset: tf.data.Dataset, batches: int) -> float:
    """CPU ms per image over ``batches`` batches of 8, after 10 to warm up."""
    iterator = iter(dataset)
    for _ in range(10):
        next(iterator)
    began = cpu_seconds()
    for _ in range(batches):
        next(iterator)
    return (cpu_seconds() - began) / (batches * 8) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--series", type=int, default=3, help="series of four builds a side")
    parser.add_argument("--data", default="/tmp/oi-bench")
    args = parser.parse_args()
    pattern = IMAGE_SETS["photos"](args.data)
    speed.standard_dataset(pattern, 8)  # TensorFlow's own first-time costs, paid once
    print("CPU s of builds 1-4 in a row:")
    for _ in range(args.series):
        for keep, label in ((False, "no cache"), (True, "trace cache")):
            row = "  ".join(f"{s:.2f}" for s in build_seconds(pattern, 4, keep))
            print(f"  {label:12s} {row}")
    builds = {"traced in place": in_place, "on kept traces": on_kept_traces}
    results: dict[str, list[float]] = {name: [] for name in builds}
    for round_ in range(args.rounds):
        order = list(builds) if round_ % 2 == 0 else list(reversed(builds))
        for name in order:
            results[name].append(cpu_ms_per_image(builds[name](pattern), args.batches))
    for name, values in results.items():
        spread = ", ".join(f"{v:.2f}" for v in values)
        print(f"{name:16s} CPU ms per image: median {statistics.median(values):.2f} ({spread})")


if __name__ == "__main__":
    main()
