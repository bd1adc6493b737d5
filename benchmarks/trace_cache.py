"""Per-image CPU of the standard pipeline traced in place against the same pipeline built on
kept traces (``object_input.tracing.trace_cache``), alternating in one process.

    python benchmarks/trace_cache.py [--rounds 4] [--batches 60]

A pipeline seen once is traced in place; built a third time, its decoder, steps and
per-example function are imported from the kept traces. Both must cost the same per image.
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
    parser.add_argument("--data", default="/tmp/oi-bench")
    args = parser.parse_args()
    pattern = IMAGE_SETS["photos"](args.data)
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
