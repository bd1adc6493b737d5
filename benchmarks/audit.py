"""The epoch audit's CPU cost per image against the pipeline's (``ServiceOptions(audit=True)``).

    python benchmarks/audit.py [--images 2048] [--rounds 3] [--epoch 100000]

The audit runs where batches arrive, in the training process: per batch, one hash-table lookup
and one insert of its record ids (``object_input.reliability.audit.DeliveryAudit.track``). Measured
side by
side in one process, rounds alternating, medians (CPU ms per image, ``resource.getrusage``):

1. standard: ``make_dataset`` with the standard steps on the noisy image set (640×480 JPEGs,
   batches of 8 at 512×512), what a worker spends per image;
2. ids: batches of 8 record ids (``"path:index"``, ``--epoch`` distinct ids a pass) through
   ``tf.data``, consumed inside the graph, and the same with the audit stage: their difference
   is the audit's cost;
3. standard + audit: the standard pipeline with the audit stage after it (the difference to 1
   is within the noise of 1; shown as a check).

The ratio printed is the audit's cost over the standard pipeline's. With the audit off nothing
of it is built: ``make_dataset`` without ``audit=True`` builds the same graph as before.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable, Iterator

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf
from common import IMAGE_SETS, cpu_seconds, interleaved_streams
from speed import standard_dataset

from object_input import fields
from object_input.reliability.audit import DeliveryAudit

BATCH = 8


def id_batches(epoch: int) -> tf.data.Dataset:
    """Endless batches of ``BATCH`` record ids, ``epoch`` distinct ones a pass, sliced from one
    tensor so that making them costs next to nothing."""
    index = tf.strings.as_string(tf.range(epoch // BATCH * BATCH))
    ids = tf.strings.join(["/data/train-00001-of-00064.tfrecord:", index])
    batches = tf.data.Dataset.from_tensor_slices(tf.reshape(ids, [-1, BATCH]))
    return batches.map(lambda batch: {fields.RECORD_ID: batch}).repeat()


def batch_sizes(make: Callable[[], tf.data.Dataset]) -> Callable[[], Iterator[int]]:
    """A start function for ``interleaved_streams``: an iterator of batch sizes."""

    def start() -> Iterator[int]:
        return (int(tf.shape(batch[fields.RECORD_ID])[0]) for batch in make())

    return start


def graph_cpu_ms(make: Callable[[], tf.data.Dataset], images: int) -> float:
    """CPU ms per image of ``images`` images of ``make()`` consumed inside the graph (a
    ``reduce``): no Python per batch to drown the stage measured."""
    dataset = make().take(images // BATCH)
    began = cpu_seconds()
    dataset.reduce(tf.constant(0, tf.int64), lambda count, _: count + 1).numpy()
    return (cpu_seconds() - began) * 1000 / images


def audited(make: Callable[[], tf.data.Dataset], epoch: int) -> Callable[[], tf.data.Dataset]:
    return lambda: DeliveryAudit(epoch).track(make())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=2048, help="images per standard round")
    parser.add_argument("--id-images", type=int, default=200_000, help="ids per ids round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epoch", type=int, default=100_000)
    parser.add_argument("--data", default="/tmp/oi-bench")
    args = parser.parse_args()
    pattern = IMAGE_SETS["noisy"](os.path.join(args.data, "noisy"))

    def standard() -> tf.data.Dataset:
        return standard_dataset(pattern, BATCH)

    def ids() -> tf.data.Dataset:
        return id_batches(args.epoch)

    streams = interleaved_streams(
        {
            "standard": batch_sizes(standard),
            "standard + audit": batch_sizes(audited(standard, args.epoch)),
        },
        args.rounds,
        args.images,
    )
    rounds: dict[str, list[float]] = {"ids": [], "ids + audit": []}
    for _ in range(args.rounds):
        rounds["ids"].append(graph_cpu_ms(ids, args.id_images))
        rounds["ids + audit"].append(graph_cpu_ms(audited(ids, args.epoch), args.id_images))
    ms = {name: timing.cpu_s_per_image * 1000 for name, timing in streams.items()}
    ms.update({name: statistics.median(values) for name, values in rounds.items()})
    for name, value in ms.items():
        print(f"{name:20s} {value:8.4f} CPU ms per image")
    cost = ms["ids + audit"] - ms["ids"]
    print(f"audit: {cost:.4f} CPU ms per image = {cost / ms['standard']:.2%} of standard's")


if __name__ == "__main__":
    main()
