"""Reading an Earth Engine image export: the EarthEngine source against the usual hand parse.

    python benchmarks/earthengine.py [--patches 96] [--size 128] [--bands 6] [--rounds 3]

Writes a GZIP export of ``--patches`` patches (``--size`` square, ``--bands`` float bands, eight
files), then times side by side (alternating rounds), in patches/s:

- the parse Earth Engine's guide shows: ``TFRecordDataset`` over the files, per band a
  ``FixedLenFeature([H, W])``, bands stacked (no patch index, no checks);
- ``make_dataset`` over ``sources.EarthEngine`` (global patch index, row, column, bounds, length
  checks naming the patch), unshuffled;
- the same, one worker's share of two shards: every worker still reads and decompresses the
  whole export (the patch index is global) but parses only its own patches.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from common import interleaved_streams, report_streams
from speed import dataset_batches

from object_input import earthengine, make_dataset
from object_input.options import ReadOptions
from object_input.sources import EarthEngine

BATCH = 16


def write(prefix: str, patches: int, size: int, bands: int) -> list[str]:
    cols = 8
    rows = -(-patches // cols)
    scene = np.random.default_rng(0).random((rows * size, cols * size, bands), np.float32)
    return earthengine.write_export(
        scene,
        prefix,
        band_names=[f"B{i}" for i in range(bands)],
        patch_size=size,
        patches_per_file=-(-rows * cols // 8),
    )


def hand_parse(files: list[str], size: int, bands: int) -> tf.data.Dataset:
    spec = {f"B{i}": tf.io.FixedLenFeature([size, size], tf.float32) for i in range(bands)}

    def parse(record):
        features = tf.io.parse_single_example(record, spec)
        return {"image": tf.stack([features[f"B{i}"] for i in range(bands)], axis=-1)}

    return (
        tf.data.TFRecordDataset(files, "GZIP")
        .map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        .repeat()
        .batch(BATCH)
        .prefetch(tf.data.AUTOTUNE)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--patches", type=int, default=96)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--bands", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--images", type=int, default=480, help="patches timed per round")
    parser.add_argument("--data", default="/tmp/oi-bench-ee")
    args = parser.parse_args()
    prefix = os.path.join(args.data, "export")
    files = write(prefix, args.patches, args.size, args.bands)
    bands = [f"B{i}" for i in range(args.bands)]

    def source() -> EarthEngine:
        return EarthEngine(prefix, bands=bands, patch_size=args.size)

    candidates = {
        "hand parse (guide)": dataset_batches(lambda: hand_parse(files, args.size, args.bands)),
        "EarthEngine source": dataset_batches(
            lambda: make_dataset(source(), batch_size=BATCH, num_epochs=None)
        ),
        "EarthEngine, 1 of 2 shards": dataset_batches(
            lambda: make_dataset(
                source(),
                batch_size=BATCH,
                num_epochs=None,
                reading=ReadOptions(num_shards=2, shard_index=0),
            )
        ),
    }
    print(f"{len(files)} files, {args.patches} patches of {args.size}² × {args.bands} bands")
    report_streams(interleaved_streams(candidates, args.rounds, args.images), "hand parse (guide)")


if __name__ == "__main__":
    main()
