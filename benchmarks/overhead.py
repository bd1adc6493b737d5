"""The fixed cost of ``make_dataset``: the decoder per record, the traced graph, the first batch.

    python benchmarks/overhead.py [--sets photos] [--records 5120] [--builds 5]

1. Decoder CPU µs per record on records of a 16×16 JPEG with 1–20 boxes (the decoder's own
   work dominates; one thread, medians of 3 passes): a plain parse + decode of the same keys,
   and ``ExampleDecoder`` flagging (as the TFRecord source runs it) and raising.
2. Per pipeline (floor, ``make_dataset`` with no steps, standard; 512×512, batches of 8): nodes
   and functions of its traced graph (every map, filter and branch function), and the CPU
   seconds of the build (Python tracing), ``iter()`` (the runtime instantiating and optimizing
   the functions) and the first ``next()``, medians of ``--builds`` warm builds, and their
   total against the floor's; "standard, step changed" builds the standard pipeline with the
   brightness's ``max_delta`` (tunable) changed each time (the notebook loop), "crop changed"
   with the crop's ``area_range`` (traced with); "buffer 16" and "num_epochs=1" are
   the standard pipeline as one exploring might ask for it.
3. The same for no steps and standard with the TFRecord source not marking what it cannot
   read, so that ``make_dataset`` catches op errors per window of records
   (``catch.catch_errors``), as it does for the sources that do not mark: what such a source
   costs the first batch.

Run it in two checkouts, one after the other, to compare them. CPU seconds, not wall time: the
machine may be shared.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import speed
import tensorflow as tf
from common import IMAGE_SETS, cpu_seconds, random_boxes
from tensorflow.core.framework import graph_pb2

from object_input.decoders import ExampleDecoder
from object_input.sources import TFRecord
from object_input.writers import build_example

_BOX_KEYS = speed._BOX_KEYS


def tiny_records(count: int = 256, seed: int = 0) -> list[bytes]:
    """Serialized records of a 16×16 JPEG with 1–20 boxes and classes."""
    rng = np.random.default_rng(seed)
    records = []
    for index in range(count):
        boxes = random_boxes(rng)
        example = build_example(
            np.zeros((16, 16, 3), np.uint8),
            boxes=boxes,
            classes=[int(c) for c in rng.integers(1, 4, size=len(boxes))],
            image_format="jpeg",
            filename=f"f{index}.jpg",
            source_id=str(index),
        )
        records.append(example.SerializeToString())
    return records


def plain_decode(record_id: tf.Tensor, serialized: tf.Tensor) -> dict[str, tf.Tensor]:
    """Parse the image, source id, boxes and classes and decode the image: no checks."""
    string = tf.io.FixedLenFeature((), tf.string, default_value="")
    spec = {
        "image/encoded": string,
        "image/source_id": string,
        "image/object/class/label": tf.io.VarLenFeature(tf.int64),
        **{key: tf.io.VarLenFeature(tf.float32) for key in _BOX_KEYS},
    }
    parsed = tf.io.parse_single_example(serialized, spec)
    boxes = tf.stack([tf.sparse.to_dense(parsed[key]) for key in _BOX_KEYS], axis=1)
    return {
        "image": tf.io.decode_jpeg(parsed["image/encoded"], channels=3),
        "boxes": boxes,
        "classes": tf.sparse.to_dense(parsed["image/object/class/label"]),
    }


def per_record_us(fn: Callable, records: list[bytes], count: int) -> float:
    """CPU µs per record of ``fn(record_id, serialized)`` mapped on one thread."""
    ids = [f"file:{i}" for i in range(len(records))]
    base = tf.data.Dataset.from_tensor_slices((ids, records)).cache().repeat()
    return element_us(base.map(tf.autograph.experimental.do_not_convert(fn)), count)


def element_us(dataset: tf.data.Dataset, count: int) -> float:
    """CPU µs per element of ``dataset`` over ``count`` elements, after 64 to warm up."""
    elements = dataset.map(lambda *_: 0)
    for _ in elements.take(64):
        pass
    began = cpu_seconds()
    for _ in elements.take(count):
        pass
    return (cpu_seconds() - began) / count * 1e6


def graph_size(dataset: tf.data.Dataset) -> tuple[int, int]:
    """(nodes, functions) of the dataset's graph, every function's nodes counted."""
    serialized = tf.raw_ops.DatasetToGraphV2(
        input_dataset=dataset._variant_tensor, external_state_policy=1
    )
    graph = graph_pb2.GraphDef()
    graph.ParseFromString(serialized.numpy())
    functions = graph.library.function
    return len(graph.node) + sum(len(f.node_def) for f in functions), len(functions)


def patched(make: Callable[[], tf.data.Dataset], target: Any, name: str, value: Any):
    """``make`` building with ``target.name`` set to ``value`` (``mock.patch.object``)."""

    def build() -> tf.data.Dataset:
        with mock.patch.object(target, name, value):
            return make()

    return build


def first_batch_cpu(make: Callable[[], tf.data.Dataset], builds: int) -> tuple[float, ...]:
    """Median CPU seconds of build, ``iter()`` and the first ``next()`` over warm builds."""
    make()  # warm: what a process that built a pipeline before pays
    rows = []
    for _ in range(builds):
        began = cpu_seconds()
        dataset = make()
        built = cpu_seconds()
        iterator = iter(dataset)
        started = cpu_seconds()
        next(iterator)
        rows.append((built - began, started - built, cpu_seconds() - started))
        del iterator
    return tuple(statistics.median(column) for column in zip(*rows, strict=True))


def changed_step(
    pattern: str, step: str, params: Callable[[float], dict[str, Any]]
) -> Callable[[], tf.data.Dataset]:
    """The standard pipeline, ``step`` with ``params(small)`` at every build, ``small`` a
    number that grows from one build to the next."""
    builds = iter(range(1, 1_000_000))

    def make() -> tf.data.Dataset:
        given = params(next(builds) * 1e-4)
        steps = [(name, given) if name == step else name for name in speed.STANDARD_STEPS]
        return speed.standard_dataset(pattern, 8, steps=steps)

    return make


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=5120, help="records per decoder pass")
    parser.add_argument("--builds", type=int, default=5)
    parser.add_argument("--data", default="/tmp/oi-bench")
    parser.add_argument("--sets", type=lambda t: t.split(","), default=["photos"])
    args = parser.parse_args()
    began = time.perf_counter()

    records = tiny_records()
    flagging, raising = ExampleDecoder(checks="flag"), ExampleDecoder(checks="raise")
    decoders = {
        "plain parse + decode (no checks)": plain_decode,
        "ExampleDecoder, flagging": lambda rid, s: flagging(s, rid),
        "ExampleDecoder, raising": lambda rid, s: raising(s, rid),
    }
    print("decoder, 16×16 JPEG records, 1–20 boxes:  CPU µs per record (median of 3)")
    for name, fn in decoders.items():
        runs = [per_record_us(fn, records, args.records) for _ in range(3)]
        print(f"  {name:36s} {statistics.median(runs):8.1f}")

    for image_set in args.sets:
        pattern = IMAGE_SETS[image_set](args.data)
        files = sorted(tf.io.gfile.glob(pattern))
        no_steps = functools.partial(speed.standard_dataset, pattern, 8, steps=())
        standard = functools.partial(speed.standard_dataset, pattern, 8)
        pipelines = {
            "floor": lambda files=files: speed.floor_dataset(files, 8),
            "make_dataset, no steps": no_steps,
            "standard": standard,
            # The notebook loop: each build with one step's parameters changed, a tunable one
            # (fed to the kept functions) or one the functions are traced with.
            "standard, step changed": changed_step(
                pattern, "random_adjust_brightness", lambda small: {"max_delta": 0.1 + small}
            ),
            "standard, crop changed": changed_step(
                pattern, "random_crop_image", lambda small: {"area_range": (0.1 + small, 1.0)}
            ),
            # What a user exploring can ask for: the first batch without a whole pass read.
            "standard, buffer 16": functools.partial(
                speed.standard_dataset, pattern, 8, shuffle_buffer_size=16
            ),
            "standard, num_epochs=1": functools.partial(
                speed.standard_dataset, pattern, 8, num_epochs=1
            ),
            # The TFRecord source not marking: make_dataset catches per window, as before.
            "no steps, window catch": patched(no_steps, TFRecord, "marks_read_errors", False),
            "standard, window catch": patched(standard, TFRecord, "marks_read_errors", False),
        }
        print(f"\n{image_set}: graph, and warm CPU seconds to the first batch")
        print(
            f"  {'pipeline':24s} {'nodes':>6s} {'functions':>9s} {'build':>6s} {'iter':>6s} "
            f"{'next':>6s} {'total':>6s} {'× floor':>7s}"
        )
        floor = None
        for name, make in pipelines.items():
            nodes, functions = graph_size(make())
            build, start, first = first_batch_cpu(make, args.builds)
            total = build + start + first
            floor = floor or total
            print(
                f"  {name:24s} {nodes:6d} {functions:9d} {build:6.2f} {start:6.2f} {first:6.2f} "
                f"{total:6.2f} {total / floor:7.1f}"
            )
    print(f"({time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
