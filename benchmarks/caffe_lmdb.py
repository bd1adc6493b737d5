"""CaffeLMDB reading speed, against the same Datum records in a TFRecord file.

    python benchmarks/caffe_lmdb.py [--kind raw|jpeg] [--records 4096] [--images 8192] [--rounds 3]

Every candidate is ``make_dataset`` over ``CaffeLMDB.decode`` (``tf.io.decode_proto``, pixels,
BGR → RGB); only the reading differs: an LMDB cursor in a Python generator (key order, or seeded
shuffled blocks) against TensorFlow's native TFRecord reader. ``raw`` is CIFAR-like (32 × 32
planar Datums), ``jpeg`` ImageNet-like (256 × 256 encoded Datums). Rounds alternate; medians
are reported.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import lmdb
import numpy as np
import tensorflow as tf
from common import interleaved_streams, report_streams
from speed import dataset_batches

import object_input as oi
from object_input.sources import CaffeLMDB, ReadContext
from object_input.sources._caffe_proto import message_class

SIZES = {"raw": 32, "jpeg": 256}


def write_data(folder: str, kind: str, records: int) -> tuple[str, str]:
    """An LMDB of ``records`` Datums and a TFRecord file of the same bytes; returns both paths."""
    database, tfrecord = os.path.join(folder, "lmdb"), os.path.join(folder, "datums.tfrecord")
    if os.path.exists(tfrecord):
        return database, tfrecord
    rng = np.random.default_rng(0)
    size = SIZES[kind]
    Datum = message_class("Datum")
    env = lmdb.open(database, map_size=1 << 32)
    with env.begin(write=True) as txn, tf.io.TFRecordWriter(tfrecord) as writer:
        for index in range(records):
            image = rng.integers(0, 256, [size, size, 3], np.uint8)
            if kind == "raw":
                planar = np.transpose(image, [2, 0, 1]).tobytes()
                datum = Datum(channels=3, height=size, width=size, data=planar, label=index % 10)
            else:
                smooth = tf.image.resize(image[::8, ::8], [size, size]).numpy().astype(np.uint8)
                jpeg = tf.io.encode_jpeg(smooth, quality=90).numpy()
                datum = Datum(data=jpeg, encoded=True, label=index % 10)
            value = datum.SerializeToString()
            txn.put(f"{index:08d}_img{index}.jpg".encode(), value)
            writer.write(value)
    env.close()
    return database, tfrecord


class TFRecordDatums(CaffeLMDB):
    """The same decoding over TensorFlow's native reader of a TFRecord file of the Datums."""

    def __init__(self, database: str, tfrecord: str):
        super().__init__(database)
        self.tfrecord = tfrecord

    def records(self, context: ReadContext) -> tf.data.Dataset:
        return tf.data.TFRecordDataset(self.tfrecord).map(
            lambda value: (tf.constant("tfrecord"), (tf.constant(b"key"), value))
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kind", choices=sorted(SIZES), default="raw")
    parser.add_argument("--records", type=int, default=4096)
    parser.add_argument("--images", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    folder = f"/tmp/oi-bench-caffe-{args.kind}-{args.records}"
    os.makedirs(folder, exist_ok=True)
    database, tfrecord = write_data(folder, args.kind, args.records)
    source = CaffeLMDB(database)
    print(source, f"{args.kind} Datums; keys-only pass for shuffle blocks:", end=" ")
    records = source.records(ReadContext(shuffle=True, seed=1))
    print(f"{len(source.block_starts())} blocks")
    del records

    baseline = TFRecordDatums(database, tfrecord)

    def dataset(reader: CaffeLMDB, shuffle: bool) -> tf.data.Dataset:
        return oi.make_dataset(
            reader, batch_size=args.batch_size, shuffle=shuffle, seed=1, num_epochs=None
        )

    candidates = {
        "TFRecord of the same Datums": dataset_batches(lambda: dataset(baseline, False)),
        "CaffeLMDB, key order": dataset_batches(lambda: dataset(source, False)),
        "CaffeLMDB, shuffled": dataset_batches(lambda: dataset(source, True)),
    }
    results = interleaved_streams(candidates, args.rounds, args.images)
    report_streams(results, "TFRecord of the same Datums")


if __name__ == "__main__":
    main()
