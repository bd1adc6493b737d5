"""Where ``make_dataset``'s CPU per image over the floor goes, and what checking per batch buys.

    python benchmarks/gap.py [--sets photos] [--rounds 4] [--batches 80]

1. Decoder CPU µs per record on records of a 16×16 JPEG with 1–20 boxes (one thread, medians
   of 5 alternating passes): ``ExampleDecoder`` flagging (as the TFRecord source runs it); the
   same parse and decode without the checks; ``parse_example`` on batches of 32 serialized
   records, then ``unbatch`` and the decode; and that with the box and class checks done once
   per batch (equal list lengths, finite, inside [0, 1], ids in range, one class per box): a
   lower bound of what a decoder that checks per batch would cost, since the image, per-box list
   and stand-in work is left out.
2. Steady CPU ms and context switches per image (all threads of the process), 512×512 batches
   of 8, medians of ``--rounds`` alternating rounds, each timing ``--batches`` batches after the
   first two: the floor; the floor's reader with ``ExampleDecoder`` and the package's resize;
   the package's TFRecord reader (byte accounting, record ids, marks) with the same; then
   ``make_dataset`` with no steps, its catch of op errors replaced by a plain map (as in
   ``overhead.py``; a diagnosis), and as it is.
"""

from __future__ import annotations

import argparse
import functools
import glob
import os
import statistics
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import speed
import tensorflow as tf
from common import IMAGE_SETS, cpu_seconds
from overhead import element_us, patched, per_record_us, tiny_records, uncaught_map

from object_input.decoders import ExampleDecoder
from object_input.ops.resize import resize_features
from object_input.reliability import skips
from object_input.sources import TFRecord
from object_input.sources._base import ReadContext

AUTOTUNE = tf.data.AUTOTUNE
BATCH = 32
_BOX_KEYS = speed._BOX_KEYS


def batched_us(decoder: ExampleDecoder, records: list[bytes], count: int, checks: bool) -> float:
    """CPU µs per record: ``parse_example`` per batch of ``BATCH``, ``unbatch``, decode."""

    def parse(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_example(serialized, decoder.spec)
        out = {"encoded": parsed["image/encoded"]}
        if checks:
            coords = [parsed[key] for key in _BOX_KEYS]
            sizes = tf.stack([c.row_lengths() for c in coords], axis=1)
            labels = parsed["image/object/class/label"]
            ok = tf.reduce_all(tf.equal(sizes, sizes[:, :1]), axis=1)
            ok &= tf.equal(labels.row_lengths(), sizes[:, 0])
            ok &= tf.reduce_all((labels >= 1) & (labels < 2**31), axis=1)
            for c in coords:
                ok &= tf.reduce_all(tf.math.is_finite(c) & (c >= 0) & (c <= 1), axis=1)
            out.update(ok=ok, boxes=tf.stack(coords, axis=-1), classes=tf.cast(labels, tf.int32))
        return out

    def decode(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return {**example, "encoded": tf.io.decode_jpeg(example["encoded"], channels=3)}

    base = tf.data.Dataset.from_tensor_slices(records).repeat()
    return element_us(base.batch(BATCH).map(parse).unbatch().map(decode), count)


def context_switches() -> int:
    """Voluntary and involuntary context switches of every live thread of this process."""
    total = 0
    for path in glob.glob("/proc/self/task/*/status"):
        try:
            with open(path) as status:
                total += sum(int(line.split()[1]) for line in status if "ctxt_switches" in line)
        except OSError:
            continue  # the thread ended while being read
    return total


def decoder_and_resize(decoder: ExampleDecoder) -> Callable[..., dict[str, tf.Tensor]]:
    """``fn(record_id, serialized, *marks)``: the decoder, then the package's resize."""

    def fn(record_id: tf.Tensor, serialized: tf.Tensor, *marks: tf.Tensor) -> dict:
        return resize_features(decoder(serialized, record_id), *speed.SIZE)

    return fn


def floor_reader(files: list[str], decoder: ExampleDecoder) -> tf.data.Dataset:
    """The floor's reader and shuffle, ``ExampleDecoder`` and the package's resize."""
    fn = decoder_and_resize(decoder)
    dataset = speed.floor_records(files).map(
        lambda serialized: fn("record", serialized), num_parallel_calls=AUTOTUNE
    )
    return dataset.padded_batch(8).prefetch(AUTOTUNE)


def package_reader(files: list[str]) -> tf.data.Dataset:
    """The package's TFRecord reader (marking, as ``make_dataset`` reads) and the same."""
    source = TFRecord(files)
    context = ReadContext(marks=True, seed=1)
    records = context.shuffled(source.records(context), speed.FLOOR_SHUFFLE_BUFFER).repeat()
    dataset = records.map(decoder_and_resize(source.decoder), num_parallel_calls=AUTOTUNE)
    return dataset.padded_batch(8).prefetch(AUTOTUNE)


def per_image(make: Callable[[], tf.data.Dataset], batches: int) -> tuple[float, float]:
    """(CPU ms, context switches) per image over ``batches`` batches after the first two."""
    iterator = iter(make())
    next(iterator)
    next(iterator)
    cpu, switches = cpu_seconds(), context_switches()
    for _ in range(batches):
        next(iterator)
    images = batches * 8
    return (cpu_seconds() - cpu) / images * 1e3, (context_switches() - switches) / images


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batches", type=int, default=80)
    parser.add_argument("--records", type=int, default=4000, help="records per decoder pass")
    parser.add_argument("--data", default="/tmp/oi-bench")
    parser.add_argument("--sets", type=lambda t: t.split(","), default=["photos"])
    args = parser.parse_args()

    records = tiny_records()
    flagging = ExampleDecoder(checks="flag")

    def parse_and_decode(record_id: tf.Tensor, serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_single_example(serialized, flagging.spec)
        return {"image": tf.io.decode_jpeg(parsed["image/encoded"], channels=3)}

    decoders = {
        "ExampleDecoder, flagging": lambda: per_record_us(
            lambda rid, s: flagging(s, rid), records, args.records
        ),
        "its parse + decode, no checks": lambda: per_record_us(
            parse_and_decode, records, args.records
        ),
        f"parse_example per {BATCH}, unbatch, decode": lambda: batched_us(
            flagging, records, args.records, checks=False
        ),
        "  + box and class checks per batch": lambda: batched_us(
            flagging, records, args.records, checks=True
        ),
    }
    runs: dict[str, list[float]] = {name: [] for name in decoders}
    for _ in range(5):
        for name, run in decoders.items():
            runs[name].append(run())
    print("decoder, 16×16 JPEG records, 1–20 boxes:  CPU µs per record (median of 5)")
    for name, values in runs.items():
        print(f"  {name:42s} {statistics.median(values):8.1f}")

    for image_set in args.sets:
        pattern = IMAGE_SETS[image_set](args.data)
        files = sorted(tf.io.gfile.glob(pattern))
        no_steps = functools.partial(speed.standard_dataset, pattern, 8, steps=())
        pipelines = {
            "floor": lambda files=files: speed.floor_dataset(files, 8),
            "floor reader + ExampleDecoder": lambda files=files: floor_reader(files, flagging),
            "package reader + ExampleDecoder": lambda files=files: package_reader(files),
            "no steps, catch → map": patched(no_steps, skips, "catch_marked", uncaught_map),
            "make_dataset, no steps": no_steps,
        }
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in pipelines}
        for _ in range(args.rounds):
            for name, make in pipelines.items():
                results[name].append(per_image(make, args.batches))
        print(f"\n{image_set}: per image, medians of {args.rounds} rounds")
        print(f"  {'pipeline':34s} {'CPU ms':>7s} {'× floor':>8s} {'switches':>9s}")
        floor = statistics.median(ms for ms, _ in results["floor"])
        for name, values in results.items():
            cpu = statistics.median(ms for ms, _ in values)
            switches = statistics.median(count for _, count in values)
            print(f"  {name:34s} {cpu:7.2f} {floor / cpu:8.2f} {switches:9.1f}")


if __name__ == "__main__":
    main()
