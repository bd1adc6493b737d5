"""Cost of catching TensorFlow's own op errors per record, against a plain map, side by side.

    python benchmarks/catch_cost.py [--images 512] [--rounds 5] [--calls 1] [--windows 4,8,16,32]

The per-example work of ``make_dataset`` without steps (decode a 640×480 JPEG record of the
benchmark's noisy set with every check, resize to 512×512), batched by 8, mapped four ways:

- plain map: ``records.map(fn)`` raising flagged records inside it, what ``make_dataset`` did
  under ``on_error="raise"`` before the window catch; an op error inside ``fn`` ends the stream
  without a record id.
- window catch: ``skips.catch_errors`` then ``skips.raise_caught``, what ``make_dataset`` uses
  for sources that do not mark what they cannot read: windows of records and an end marker,
  each mapped under ``ignore_errors``; the records that failed are found by their positions in
  the window (one row per window size).
- marked catch: ``skips.catch_marked`` then ``skips.raise_caught``, what ``make_dataset`` uses
  for TFRecord files: one map under ``ignore_errors``, each element carrying the ids of the
  records before it.
- per-record catch: each record mapped in its own one-element dataset under ``ignore_errors``
  (what ``on_error="skip"`` did before the window catch).
- and, end to end, ``make_dataset`` with ``on_error="raise"`` and ``"skip"``.

``--calls`` is ``num_parallel_calls`` (1: one thread maps, which makes the CPU time per image
least noisy on a shared machine). Rounds alternate between candidates; medians are reported.
Compare the CPU ms per image: the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Iterator

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf
from common import interleaved_streams, report_streams, write_benchmark_records

import object_input as oi
from object_input import errors, fields, skips
from object_input.ops.resize import resize_features
from object_input.sources import ReadContext

SIZE = (512, 512)
BATCH = 8


def _records(source: oi.sources.TFRecord) -> tf.data.Dataset:
    """``(position, (record_id, payload))`` pairs, repeated, in file order."""
    records = source.records(ReadContext(shuffle=False)).repeat()
    return tf.data.Dataset.zip((tf.data.Dataset.counter(), records))


def _per_record(records: tf.data.Dataset, fn: Callable, calls: int) -> tf.data.Dataset:
    """The former per-record catch: a one-element dataset per record, placeholder on failure."""

    def one(position: tf.Tensor, record: tuple) -> tf.data.Dataset:
        attempt = tf.data.Dataset.from_tensors((position, record)).map(fn).ignore_errors()
        failed = errors.placeholder(attempt.element_spec)
        failed[fields.ERROR] = tf.constant(errors.code("undecodable"), tf.int32)
        return attempt.concatenate(tf.data.Dataset.from_tensors(failed)).take(1)

    return records.interleave(one, cycle_length=calls, block_length=1, num_parallel_calls=calls)


def candidates(pattern: str, calls: int, windows: list[int]) -> dict[str, Callable[[], Iterator]]:
    """Starters of the compared pipelines, by label."""
    source = oi.sources.TFRecord(pattern)

    @tf.autograph.experimental.do_not_convert
    def fn(position: tf.Tensor, record: tuple) -> dict:
        return resize_features(source.decode(*record), *SIZE)

    def plain() -> tf.data.Dataset:
        # Flagged records raise inside the map, as make_dataset did before the window catch.
        return _records(source).map(
            lambda *record: errors.raise_flagged(fn(*record)), num_parallel_calls=calls
        )

    def windowed(window: int) -> tf.data.Dataset:
        caught = skips.catch_errors(
            _records(source),
            fn,
            record_id=lambda position, record: record[0],
            num_parallel_calls=calls,
            window=window,
        )
        return skips.raise_caught(caught)

    def marked() -> tf.data.Dataset:
        caught = skips.catch_marked(
            _records(source),
            fn,
            record_id=lambda position, record: record[0],
            mark=lambda position, record: (tf.constant(errors.OK), tf.constant("")),
            num_parallel_calls=calls,
        )
        return skips.raise_caught(caught)

    def pipeline(on_error: str) -> tf.data.Dataset:
        return oi.make_dataset(
            pattern,
            batch_size=BATCH,
            image_size=SIZE,
            shuffle=False,
            num_epochs=None,
            num_parallel_calls=calls,
            on_error=on_error,
        )

    def batches(make: Callable[[], tf.data.Dataset], batch: bool = True) -> Callable[[], Iterator]:
        def start() -> Iterator[int]:
            dataset = make()
            if batch:
                dataset = dataset.padded_batch(BATCH).prefetch(1)
            return (int(b[fields.IMAGE].shape[0]) for b in dataset)

        return start

    starters = {"plain map": batches(plain)}
    for window in windows:
        starters[f"window catch, {window} records"] = batches(lambda w=window: windowed(w))
    starters["marked catch"] = batches(marked)
    starters["per-record catch"] = batches(lambda: _per_record(_records(source), fn, calls))
    starters["make_dataset, on_error='raise'"] = batches(lambda: pipeline("raise"), batch=False)
    starters["make_dataset, on_error='skip'"] = batches(lambda: pipeline("skip"), batch=False)
    return starters


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--images", type=int, default=512, help="images timed per round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--calls", type=int, default=1, help="num_parallel_calls (-1: AUTOTUNE)")
    parser.add_argument("--windows", default="4,8,16,32", help="window sizes, comma-separated")
    parser.add_argument("--data", default="/tmp/oi-bench")
    args = parser.parse_args()
    os.makedirs(args.data, exist_ok=True)
    pattern = write_benchmark_records(args.data)
    windows = [int(w) for w in args.windows.split(",")]
    print(f"{args.images} images × {args.rounds} rounds, num_parallel_calls={args.calls}")
    began = time.perf_counter()
    starters = candidates(pattern, args.calls, windows)
    results = interleaved_streams(starters, args.rounds, args.images)
    report_streams(results, "plain map")
    base = results["plain map"].cpu_s_per_image
    for name, timing in results.items():
        extra = (timing.cpu_s_per_image - base) * 1000
        print(f"{name:40s} {extra:+6.2f} CPU ms/img against the plain map")
    print(f"({time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
